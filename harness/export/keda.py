"""``harness export keda``: a keda.sh/v1alpha1 ScaledObject, one ``prometheus`` trigger
(AverageValue), built by :func:`harness.export.scaling.scaled_object`."""

from __future__ import annotations

from harness.export.scaling import Notes, Target, scaled_object
from harness.export.targets import Part
from harness.profile.schema import Profile


def manifest(prof: Profile, target: Target, notes: Notes, adapter_rules_file: str | None) -> Part:
    return Part(scaled_object(prof, target, notes), "KEDA ScaledObject")
