"""Section 4 of the results README, issue 29's part: our whole served signature against the reference pipeline's
(TFX's native-Keras taxi model), per batch, and where each signature's time goes per op type."""

from __future__ import annotations

from tests.bench.report_parts import met
from tests.bench.serving_bench import STAGE_OPS

_PROFILE_BATCHES = ("1", "1024")
_STAGE_NAMES = {"parse": "parse", "tft_layer": "function calls", "network_and_rest": "the other ops"}


def _shares(profile: dict, top: int) -> str:
    """One traced signature's stages and its ``top`` op types outside parse and the function calls, as shares of its
    summed op time."""
    total = profile["traced_ms_per_call"] or 1.0
    found = profile.get("stages", {})  # written with sorted keys: shown in the graph's order
    stages = ", ".join(f"{name} {found[k] / total:.0%}" for k, name in _STAGE_NAMES.items() if k in found)
    staged = {op for ops in STAGE_OPS.values() for op in ops}
    others = [(op, v) for op, v in profile["ops"].items() if op not in staged]
    ops = sorted(others, key=lambda kv: -kv[1]["ms_per_call"])
    shown = ", ".join(f"{op} {v['ms_per_call'] / total:.0%}" for op, v in ops[:top])
    return f"{stages} (top op types there: {shown})" if stages else shown


def profile_sentence(profiles: dict[str, dict[str, dict]], top: int = 2) -> str | None:
    """One sentence: each signature's stages and ``top`` other op types at batch 1 and 1024
    (``signature_op_profile``)."""
    parts = []
    for name, by_batch in profiles.items():
        found = [
            f"at batch {b} ({by_batch[b]['traced_ms_per_call']:.2f} ms) {_shares(by_batch[b], top)}"
            for b in _PROFILE_BATCHES
            if b in by_batch
        ]
        if found:
            parts.append(f"{name} " + ", ".join(found))
    if not parts:
        return None
    return (
        "Where each signature's time goes under `Session::Run`, traced (shares of the summed op time; a "
        "function call is timed whole: the reference's TFT layer, and ours at batch 1024 its network's row-shard "
        "branch; ours runs its TFT ops inline, among the other ops): " + "; ".join(parts) + "."
    )


def reference_signature_lines(r: dict) -> list[str]:
    """Our ``serving_default`` / the reference's at every batch (target ≤ 1x), judged on the ``TF_SessionRun``
    timings where the C harness ran; a line saying why where the reference was not measured."""
    if "signature_vs_reference" not in r:
        why = r.get("reference_unavailable")
        return [f"- The reference's signature was not measured: {why}.", ""] if why else []
    runtime, target = r["signature_target_runtime"], r["target_vs_reference"]
    other = "reference_signature_session" if runtime.endswith("_session") else "reference_signature"
    lines = [
        f"Our whole `serving_default` (raw serialized tf.Examples in: parse, TFT, network; `{runtime}`) against "
        f"the reference's (TFX's native-Keras taxi model as its Pusher pushed it, `{other}`), on the same eval "
        "rows and threads, in the same rounds:",
        "",
    ]
    for batch, ratio in sorted(r["signature_vs_reference"].items(), key=lambda kv: int(kv[0])):
        ours, ref = r["latency"][runtime][batch]["median_ms"], r["latency"][other][batch]["median_ms"]
        lines.append(
            f"- batch {batch}: ours {ours:.3f} ms, reference {ref:.3f} ms: {ratio:.2f}x (target ≤ "
            f"{target}): {met(ratio <= target)}."
        )
    sentence = profile_sentence(r.get("signature_op_profile", {}))
    return [*lines, "", *([sentence, ""] if sentence else [])]
