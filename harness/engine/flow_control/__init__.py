"""The llm-d router's flow-control layer as the engine's admission and queue (a profile with
``flow_control:``): flows and bands (flows.py), fairness (fairness.py), ordering
(ordering.py), endpoints and saturation detectors (saturation.py), usage-limit ceilings
(usage_limits.py), the outcomes by their llm-d names (outcomes.py), and the controller that
ties them (controller.py). The scheduler calls the controller at arrival, at each dispatch
and when a request ends; a profile without ``flow_control:`` never builds one."""
