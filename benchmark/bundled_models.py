"""Put a trained model of ppo_lstm_selfplay.py into cleanfive/models/ with its card.

Copies the weights and the run's arguments only (a few hundred KB, read with weights_only=True) to
``cleanfive/models/<name>.cleanfive_model``, rates the copy with the script's own ``--eval-only`` (512 games against
every reference of its world, sampled actions, each side in half of the games) and writes the card
``cleanfive/models/<name>.md``: what the model is, the command that trained it, where and when, and the table that
``--eval-only`` printed; a Connect Four card also its perfect-play section (``benchmark/connect4_judge.py``).
``tests/test_models.py`` (slow) plays the table again and compares.

    uv run --all-extras python benchmark/bundled_models.py --model runs/<run>/ppo_lstm_selfplay.cleanfive_model \\
        --name connect4 --trained "uv run python cleanfive/ppo_lstm_selfplay.py --seed 1 ..." --about "..."
"""

import subprocess
import sys

import connect4_judge
import provenance as pv
import torch

MODELS = pv.ROOT / "cleanfive" / "models"
EVAL_GAMES = 512
RATING_CODE = ("cleanfive/ppo_lstm_selfplay.py", "cleanfive/envs", "cleanfive/trueskill_league.py")  # what plays
PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--model", required=True, help="a --save-model file of ppo_lstm_selfplay.py")
PARSER.add_argument("--name", required=True, help="the bundled model's name: cleanfive/models/<name>.cleanfive_model")
PARSER.add_argument("--trained", required=True, help="the command that trained it")
PARSER.add_argument("--trained-at", required=True, help="commit, date and machine of the training run")
PARSER.add_argument("--about", required=True, help="one paragraph: what the model is and how it was chosen")


def eval_command(path: str) -> list[str]:
    return ["cleanfive/ppo_lstm_selfplay.py", "--eval-only", path, "--eval-games", str(EVAL_GAMES)]


if __name__ == "__main__":
    args = PARSER.parse_args()
    saved = torch.load(args.model, map_location="cpu", weights_only=True)  # data, never code
    pv.check(saved.get("script") == "ppo_lstm_selfplay.py", f"--model {args.model}: not a model of ppo_lstm_selfplay")
    path = MODELS / f"{args.name}.cleanfive_model"
    MODELS.mkdir(exist_ok=True)
    torch.save({key: saved[key] for key in ("script", "args", "model")}, path)
    relative = str(path.relative_to(pv.ROOT))
    start = pv.now()
    result = subprocess.run([sys.executable, *eval_command(relative)], cwd=pv.ROOT, capture_output=True, text=True)
    pv.check(result.returncode == 0, f"--eval-only failed: {result.stderr[-2000:]}")
    table = [line for line in result.stdout.splitlines() if line.startswith("|") or line.startswith("trueskill_mu=")]
    env_id, size = saved["args"]["env_id"], path.stat().st_size
    card = [
        f"# `{args.name}`: {env_id}",
        "",
        args.about,
        "",
        f"- file: `{relative}` ({size / 1024:.0f} KB: weights and the run's arguments, plain data)",
        f"- trained with: `{args.trained}`",
        f"- trained at: {args.trained_at}",
        f"- rated on {start} at commit `{pv.code_version(*RATING_CODE)}` on {pv.machine()}, with:",
        "",
        "```bash",
        "uv run python " + " ".join(eval_command(relative)),
        "```",
        "",
        f"Against every reference of {env_id}, {EVAL_GAMES} games each (sampled actions, the model on each side in "
        "half of the games); the references' TrueSkill μ: `cleanfive/envs/reference_ratings.json`:",
        "",
        *table[:-1],
        "",
        f"Its TrueSkill rating after these games: `{table[-1]}`.",
        "",
    ]
    if env_id == connect4_judge.ENV_ID:  # against a perfect solver's scores of 2,402 positions
        card += connect4_judge.card_section(relative, connect4_judge.judge(relative))
    (MODELS / f"{args.name}.md").write_text("\n".join(card))
    print("\n".join(card))
    print(f"saved {relative} and cleanfive/models/{args.name}.md")
