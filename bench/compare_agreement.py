"""Does an adaptive comparison agree with a fixed 16-replicate paired test? (issue 18, item 3)

For each env, in one sweep directory:

1. the adaptive comparison of PPO and A2C (the two arms):
   ``python -m rlsweep -m agent=ppo,a2c env=<env> compare.rounds=4`` (4 replicates a round,
   at most 16 per arm, family-wise error 0.05; the agents' default settings and budget,
   100k steps, as in the README's main job), or with ``--presets`` their tuned presets
   ``+preset=ppo_<env>,a2c_<env>`` (1M / 500k steps: hours on 2 busy cores);
2. the fixed grid ``'seed=range(16)'`` of the same arms in the same directory: it reuses
   the comparison's jobs and runs only the replicates the comparison did not need;
3. the paired test the report computes (Wilcoxon signed-rank on the 16 paired final returns,
   Holm-adjusted; :func:`rlsweep.report.comparisons.paired_comparisons`), its verdict
   "ppo > a2c" / "ppo < a2c" when p < 0.05, else "no difference shown";

and prints the comparison's decision, the seeds it spent, a fixed-N design's seeds, the
paired test's verdict and whether the two agree.

    python bench/compare_agreement.py --out /tmp/compare_agreement --n-jobs 2

With ``--presets``, Acrobot runs at ``--acrobot-steps`` (200k by default, instead of the
presets' 1M for PPO and 500k for A2C).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ALPHA = 0.05
REPLICATES = 16


def run(args: list[str], cwd: Path) -> float:
    """``python -m rlsweep -m ARGS`` in ``cwd``; its wall time. Exits on failure."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rlsweep", "-m", *args], cwd=cwd, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): python -m rlsweep -m {' '.join(args)}")
    return time.perf_counter() - start


def paired_verdict(sweep: Path) -> tuple[str, float, float, int]:
    """The report's paired test of PPO against A2C: verdict, mean difference (ppo - a2c),
    Holm-adjusted p-value, pairs."""
    from rlsweep.report.comparisons import paired_comparisons
    from rlsweep.report.read import read_runs
    from rlsweep.report.runs import deduplicate

    runs, _, _ = deduplicate(read_runs([sweep]).runs)
    (c,) = paired_comparisons(runs, "final_return")
    sign = 1.0 if (c.a, c.b) == ("ppo", "a2c") else -1.0
    diff = sign * c.difference
    if c.paired and c.p_holm < ALPHA:
        verdict = "ppo > a2c" if diff > 0 else "ppo < a2c"
    else:
        verdict = "no difference shown"
    return verdict, diff, c.p_holm, c.n_pairs


def adaptive_verdict(record: dict) -> str:
    (pair,) = record["pairs"]
    if pair["decision"] == "equal":
        return "no difference shown"
    first_wins = pair["decision"] == "larger"
    winner = pair["a"] if first_wins else pair["b"]
    return "ppo > a2c" if "ppo" in winner else "ppo < a2c"


def one_env(env: str, out: Path, n_jobs: int, extra: list[str], presets: bool) -> dict:
    arms = [f"+preset=ppo_{env},a2c_{env}"] if presets else ["agent=ppo,a2c", f"env={env}"]
    common = [*arms, f"n_jobs={n_jobs}", f"name=compare_{env}", *extra]
    adaptive_s = run([*common, "compare.rounds=4", "compare.per_round=4"], out)
    sweep = out / "multirun" / f"compare_{env}"
    record = json.loads((sweep / "compare.json").read_text())
    fixed_s = run([*common, f"seed=range({REPLICATES})"], out)
    verdict, diff, p, pairs = paired_verdict(sweep)
    decided = adaptive_verdict(record)
    return {
        "env": env,
        "decision": decided,
        "rounds": record["rounds_run"],
        "seeds_spent": record["seeds_spent"],
        "fixed_n_seeds": record["fixed_n_total"],
        "paired": verdict,
        "difference": diff,
        "p_holm": p,
        "pairs": pairs,
        "agree": decided == verdict,
        "adaptive_s": adaptive_s,
        "fixed_extra_s": fixed_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/compare_agreement"))
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--presets", action="store_true", help="the tuned presets as arms")
    parser.add_argument("--acrobot-steps", type=int, default=200_000)
    parser.add_argument("--envs", nargs="+", default=["cartpole", "acrobot"])
    parser.add_argument("--extra", nargs="*", default=[], help="overrides for every job")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for env in args.envs:
        preset_acrobot = args.presets and env == "acrobot"
        extra = [f"train.total_steps={args.acrobot_steps}"] if preset_acrobot else []
        rows.append(one_env(env, args.out, args.n_jobs, extra + args.extra, args.presets))
    print(
        "| env | adaptive decision | rounds | seeds spent | fixed-N seeds | paired test "
        "(16 pairs) | ppo - a2c | p (Holm) | agree | adaptive wall | fixed-N extra wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['env']} | {r['decision']} | {r['rounds']} | {r['seeds_spent']} | "
            f"{r['fixed_n_seeds']} | {r['paired']} ({r['pairs']} pairs) | "
            f"{r['difference']:.2f} | {r['p_holm']:.4f} | {'yes' if r['agree'] else 'NO'} | "
            f"{r['adaptive_s'] / 60:.1f} min | {r['fixed_extra_s'] / 60:.1f} min |"
        )
    (args.out / "agreement.json").write_text(json.dumps(rows, indent=2) + "\n")
    if not all(r["agree"] for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
