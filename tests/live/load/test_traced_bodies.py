"""What a traced arrival sends (harness/live/load/trace_bodies.py), without a network: a prompt of 4
characters per traced prompt token, the traced output as the length cap in the wire's field,
the same JSON a full encoding would write; untraced profiles send the bytes they always did;
and the live summary's ``trace`` block (results/client_figures.trace_figures)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from harness.live.load.calls import ClientRequest, Plan, RequestSpec, make_config
from harness.live.load.dialect import request_body
from harness.profile import Profile, loads
from harness.profile.schema.fields import MAX_PROMPT_CHARS, MAX_TOKENS
from harness.results.client_figures import trace_figures
from harness.workload.arrivals import schedule

CLASSES = """
classes:
  chat: {weight: 1, prompt: "Say \\"hello\\"\\n", max_tokens: 8}
  live: {weight: 1, prompt: "Stream it", max_tokens: 8, stream: true, priority: critical}
"""
# (ms, prompt tokens, output tokens): zeros and lengths past the limits included
ROWS = [
    (0, 100, 20),
    (250, 1, 1),
    (500, 0, 0),
    (750, 3, 7),
    (1000, 300_000, 200_000),
    (1250, 2, 5000),
]


def traced_profile(tmp: Path, wire: str = "") -> Profile:
    f = tmp / "t.jsonl"
    f.write_bytes(
        b"".join(
            orjson.dumps({"timestamp": t, "input_length": p, "output_length": o}) + b"\n"
            for t, p, o in ROWS
        )
    )
    return loads(
        f"""
name: traced
duration_s: 10
arrivals: {{process: trace, format: mooncake, file: '{f}',
           trace: {{classes: {{by: prompt_tokens, bins: [{{max: 50, class: live}},
                                                        {{max: null, class: chat}}]}}}}}}
{CLASSES}
{wire}
""",
        file="traced.yaml",
    )


def spec_of(prof: Profile, tmp: Path) -> tuple[Plan, RequestSpec]:
    cfg = make_config(
        prof,
        seed=1,
        time_scale=1.0,
        base_url="http://127.0.0.1:1",
        path="/v1/chat/completions",
        model="m",
        api_key_env=None,
        proxied=False,
        max_requests=None,
        workdir=tmp,
    )
    plan = Plan.from_message({**cfg, "start_epoch": 0.0, "index": 0, "n": 1})
    return plan, RequestSpec(plan)


def test_untraced_profiles_send_the_same_bytes_as_before(tmp_path: Path) -> None:
    prof = loads(
        "name: plain\nduration_s: 5\narrivals: {phases: [{until_s: 5, rate_per_s: 4}]}"
        f"\n{CLASSES}"
    )
    plan, spec = spec_of(prof, tmp_path)
    arrivals = list(plan.arrivals())
    assert {a.cls for a in arrivals} == {"chat", "live"}
    for a in arrivals:
        assert spec.body_for(a) is spec.body[a.cls]
    assert (
        spec.body["chat"]
        == b'{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"Say'
        b' \\"hello\\"\\n"}]}'
    )
    assert spec.body["live"] == request_body(prof.classes["live"], "m", prof.wire)


def expected(a: Any, cls: Any, field: str, chars: int, cap: int) -> dict[str, Any]:
    text = (a.id + " " + "the quick brown fox jumps over the lazy dog " * 30_000)[:chars]
    body: dict[str, Any] = {
        "model": "m",
        field: cap,
        "messages": [{"role": "user", "content": text}],
    }
    if cls.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def test_a_traced_arrival_sends_its_rows_prompt_length_and_output_cap(tmp_path: Path) -> None:
    for field, wire in (
        ("max_tokens", ""),
        ("max_completion_tokens", "wire: {max_tokens_field: max_completion_tokens}"),
    ):
        prof = traced_profile(tmp_path, wire)
        plan, spec = spec_of(prof, tmp_path)
        arrivals = list(plan.arrivals())
        assert [(a.prompt_tokens, a.output_tokens) for a in arrivals] == [r[1:] for r in ROWS]
        for a in arrivals:
            assert a.prompt_tokens is not None and a.output_tokens is not None
            chars = 4 * min(max(1, a.prompt_tokens), MAX_PROMPT_CHARS // 4)
            cap = min(max(1, a.output_tokens), MAX_TOKENS)
            body = spec.body_for(a)
            want = expected(a, prof.classes[a.cls], field, chars, cap)
            # the joined template is byte for byte what a full JSON encoding writes
            assert body == orjson.dumps(want), (a, body[:120])
            assert len(orjson.loads(body)["messages"][0]["content"]) == chars
        by_id = {a.id: orjson.loads(spec.body_for(a)) for a in arrivals}
        assert by_id["r-000002"]["messages"][0]["content"] == "r-00"  # 1 token: 4 characters
        assert by_id["r-000003"][field] == 1  # 0 output tokens asks for 1
        assert by_id["r-000005"][field] == MAX_TOKENS
        assert by_id["r-000002"]["stream"] is True and "stream" not in by_id["r-000001"]


def test_without_usage_a_traced_requests_tokens_are_estimated_from_its_row(
    tmp_path: Path,
) -> None:
    prof = traced_profile(tmp_path)
    _plan, spec = spec_of(prof, tmp_path)
    a = next(x for x in schedule(prof) if x.id == "r-000004")  # 3 prompt, 7 output tokens
    call = ClientRequest(a, 0.0, 0.0)
    call.begin()
    call.chars = 400  # far more content than asked for: capped by the row's output
    call.settle("completed")
    assert spec.token_figures(call) == ({"prompt": 3, "completion": 7}, "estimated")


def test_the_trace_block_sets_traced_totals_beside_the_achieved(tmp_path: Path) -> None:
    def rec(i: int, outcome: str, tokens: dict[str, int] | None) -> dict[str, Any]:
        return {
            "id": f"r-{i:06d}",
            "outcome": outcome,
            "tokens": tokens,
            "tokens_source": "usage" if tokens else None,
        }

    rows = [(10, 2), (20, 3), (30, 4), (40, 5)]
    recs = [
        rec(1, "completed", {"prompt": 10, "completion": 2}),
        rec(2, "rejected", None),
        rec(3, "completed", {"prompt": 30, "completion": 1}),
    ]
    block = trace_figures(recs, rows)
    assert block == {
        "arrivals": 3,
        "prompt_tokens": 60,
        "output_tokens": 9,
        "completed": {"requests": 2, "prompt_tokens": 40, "output_tokens": 6},
        "achieved": {"prompt_tokens": 40, "output_tokens": 3, "source": "usage"},
    }
    assert trace_figures(recs, None)["arrivals"] is None


def test_classes_with_token_distributions_send_their_drawn_sizes_as_the_stub_draws_them(
    tmp_path: Path,
) -> None:
    from harness.ground.text_tokens import prompt_tokens
    from harness.upstream_model.draws import RequestDraws
    from harness.upstream_model.latency import token_counts

    prof = loads(
        """
name: sized
duration_s: 5
arrivals: {phases: [{until_s: 5, rate_per_s: 8}]}
classes:
  sized: {weight: 1, prompt: "Review this", max_tokens: 512,
          prompt_tokens: {dist: lognormal, median: 1500, sigma: 0.6},
          completion_tokens: {dist: uniform, low: 10, high: 900}}
  plain: {weight: 1, prompt: "Say hi", max_tokens: 8}
""",
        file="sized.yaml",
    )
    plan, spec = spec_of(prof, tmp_path)
    arrivals = list(plan.arrivals())
    sized = [a for a in arrivals if a.cls == "sized"]
    assert sized and any(a.cls == "plain" for a in arrivals)
    stub = RequestDraws(1)  # the stub's draws for the run's seed
    c = prof.classes["sized"]
    for a in arrivals:
        body = orjson.loads(spec.body_for(a))
        if a.cls == "plain":
            assert spec.body_for(a) is spec.body["plain"]  # no distribution: sent as written
            continue
        stub.begin(a.id, 1)
        p, n, _ = token_counts(
            c.prompt_tokens,
            c.completion_tokens,
            prompt_tokens(len(c.prompt_text())),
            c.max_tokens,
            stub.tokens,
        )
        assert prompt_tokens(len(body["messages"][0]["content"])) == p
        assert body["max_tokens"] == n <= c.max_tokens  # the draw, capped as the stub caps it
    assert len({orjson.loads(spec.body_for(a))["max_tokens"] for a in sized}) > 1


def test_a_workers_copy_of_the_trace_is_removed_when_it_exits(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = f"""
import pathlib, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
from tests.live.load.test_traced_bodies import spec_of, traced_profile
folder = pathlib.Path({str(tmp_path)!r})
plan, _spec = spec_of(traced_profile(folder), folder)
copy = pathlib.Path(plan.profile.arrivals.file)
assert copy.is_file() and copy.name.startswith("harness-trace-")
print(copy)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    copy = Path(out.stdout.strip().splitlines()[-1])
    assert copy.name.startswith("harness-trace-") and not copy.exists()
