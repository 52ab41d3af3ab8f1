# docs and experiment results: docs/ppo_lstm_selfplay.md (mkdocs site: `uv run --all-extras mkdocs serve`)
import copy
import os
import random
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from PIL import Image
from torch.utils.tensorboard import SummaryWriter

from cleanfive.envs.football import FootballUnavailable
from cleanfive.envs.teams import make_team_env, play_bots
from cleanfive.trueskill_league import OpponentPool, ReferenceEvaluator, fit_reference_ratings, rating_from_dict


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = True
    """if toggled, cuda will be enabled when available"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "cleanfive"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """save a GIF of one game per evaluation to `videos/{run_name}` (worlds that render: the lane world, football)"""
    save_model: bool = False
    """whether to save the final model (with its `Args`) into `runs/{run_name}`"""
    save_every: int = 20
    """write `runs/{run_name}/checkpoint.pt` atomically every this many updates (0: never)"""
    resume: str | None = None
    """continue from a checkpoint (its `Args` are used, other flags ignored); the lane world resumes bit for bit,
    the other worlds restart the games in progress with fresh seeds"""
    eval_only: str | None = None
    """rate a model saved by `--save-model` (or a checkpoint) against every reference in the world it was trained
    for, print the results and exit"""
    quiet: bool = False
    """if toggled, no progress line is printed"""

    # Algorithm specific arguments
    env_id: str = "ConnectFour-v1"
    """the id of the two-sided world (one of cleanfive.envs.teams.TEAM_ENV_IDS; the team worlds: Moba5v5-v0,
    Moba5v5-v1, VmasFootball-v0); the default is the one that visibly learns in minutes on a CPU"""
    num_heroes: int | None = None
    """heroes per side, sharing the policy's weights (default: 5 in the team worlds, 1 in the board games)"""
    total_timesteps: int = 3_000_000
    """total environment steps (each step moves every hero of both sides of every environment)"""
    learning_rate: float = 1e-3
    """the learning rate of the optimizer"""
    num_envs: int = 64
    """the number of parallel games"""
    num_steps: int = 64
    """the number of steps of each rollout segment (segments do not wait for games to end)"""
    bptt_len: int = 16
    """truncated BPTT: the length of each training sequence, cut from the segment"""
    anneal_lr: bool = True
    """toggle learning rate annealing"""
    horizon_seconds: float = 100.0
    """time horizon H in game seconds: gamma = 1 - T / H with T the game seconds per step (Appendix, "horizon")"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 4
    """the number of mini-batches"""
    update_epochs: int = 4
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """toggles whether or not to use a clipped loss for the value function"""
    ent_coef: float = 0.01
    """coefficient of the entropy at the start"""
    ent_coef_final: float = 0.001
    """coefficient of the entropy at the end, annealed linearly (OpenAI Five: 0.01 -> 0.001)"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    clip_grad_per_param: bool = False
    """OpenAI Five's gradient clipping: each gradient entry to +-5 sqrt(v), v its running second moment"""
    target_kl: float | None = None
    """the target KL divergence threshold"""
    policy_lag: int = 0
    """staleness (Appendix M): each rollout acts with the parameters of `policy_lag` updates ago (0: the latest)"""
    hidden_size: int = 256
    """width of the MLP encoder and of the LSTM"""
    norm_obs: bool = True
    """normalise observations by running mean and std, clipped to +-5"""
    norm_reward: bool = True
    """divide rewards by a running estimate of the standard deviation of the discounted return"""

    # Reward shaping of the team worlds (OpenAI Five, Appendix G): score weights, then these, in this order
    score_weights: tuple[str, ...] = ()
    """overrides of the world's `DEFAULT_SCORE_WEIGHTS` as name=value, e.g. `wrong_lane=0 deaths=-0.5`"""
    zero_sum: bool = True
    """subtract the mean reward of the enemy heroes from each hero's reward"""
    team_spirit_start: float = 0.3
    """team spirit tau at the start: r_i <- (1 - tau) r_i + tau mean(team)"""
    team_spirit_end: float = 1.0
    """team spirit tau at the end, annealed linearly (OpenAI Five: 0.3 -> 1.0)"""
    time_decay: float = 0.6
    """rewards other than the win are multiplied by time_decay ** (t / time_decay_seconds)"""
    time_decay_seconds: float = 100.0
    """game seconds per factor time_decay (OpenAI Five: 10 minutes of ~45-minute games)"""

    # Self-play (OpenAI Five, Appendix N)
    past_fraction: float = 0.2
    """fraction of games played against past versions (the rest: latest vs latest)"""
    pool_every: int = 10
    """add the current policy to the past-opponent pool every this many updates"""
    quality_lr: float = 0.01
    """eta of the quality-score update q_i -= eta / (N p_i)"""
    bot_fraction: float = 0.0
    """fraction of the other games played against the reference bots at the start, annealed linearly to 0: a
    curriculum that is not part of OpenAI Five's recipe (0: self-play only)"""

    # TrueSkill evaluation against fixed references (OpenAI Five, Appendix J)
    references: tuple[str, ...] = ()
    """scripted reference bots, the first one the anchor at mu = 0 (empty: every bot of the world)"""
    reference_games: int = 400
    """games per pair of references to rate the reference pool once at start"""
    eval_every: int = 10
    """evaluate against the references every this many updates"""
    eval_games: int = 64
    """games per chosen reference at each evaluation"""

    # to be filled in runtime
    num_players: int = 0
    """heroes driven by the script: num_envs * 2 sides * heroes per side"""
    gamma: float = 0.0
    """the discount factor gamma (computed in runtime from horizon_seconds)"""
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    num_sequences: int = 0
    """the number of BPTT sequences of whole teams per rollout (computed in runtime)"""
    minibatch_sequences: int = 0
    """the number of team sequences per mini-batch (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def usage_error(message: str) -> None:
    """One clear line and exit code 2 for a user error: no traceback."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def numerical_fault_line(iteration: int, last_good: str | None) -> str:
    """The one line a diverged run stops with (exit code 1), naming the last checkpoint written before the fault."""
    good = last_good or "none (use --save-every)"
    return f"error: non-finite loss or parameters at update {iteration}; stopped. Last good checkpoint: {good}"


def update_moments(mean, var, count, batch):
    """Running mean and variance over the rows of `batch`, merged with the parallel-variance formula."""
    batch_mean, batch_var, batch_count = batch.mean(0), batch.var(0, unbiased=False), batch.shape[0]
    delta, total = batch_mean - mean, count + batch_count
    new_mean = mean + delta * batch_count / total
    new_var = (var * count + batch_var * batch_count + delta**2 * count * batch_count / total) / total
    return new_mean, new_var, total


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_size: int, num_actions: int, num_heroes: int, hidden_size: int):
        super().__init__()
        self.num_heroes = num_heroes
        # observation normalisation statistics travel with the weights (past versions keep their own)
        self.register_buffer("obs_mean", torch.zeros(obs_size))
        self.register_buffer("obs_var", torch.ones(obs_size))
        self.register_buffer("obs_count", torch.tensor(1e-4))
        self.encoder = nn.Sequential(
            layer_init(nn.Linear(obs_size, hidden_size)),
            nn.ReLU(),
            layer_init(nn.Linear(hidden_size, hidden_size)),
            nn.ReLU(),
        )
        self.hero_embedding = nn.Embedding(num_heroes, hidden_size)  # hero-id input: which hero this row drives
        self.pool_size = hidden_size // 4
        self.lstm = nn.LSTM(hidden_size + self.pool_size, hidden_size)
        for name, param in self.lstm.named_parameters():
            if "bias" in name:
                nn.init.constant_(param, 0)
            elif "weight" in name:
                nn.init.orthogonal_(param, 1.0)
        self.actor = layer_init(nn.Linear(hidden_size, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(hidden_size, 1), std=1)

    def update_obs_stats(self, x):
        x = x.flatten(1)
        self.obs_mean, self.obs_var, self.obs_count = update_moments(self.obs_mean, self.obs_var, self.obs_count, x)

    def embed(self, x):
        # x: (B, *obs_shape), the N heroes of a team in consecutive rows
        x = ((x.flatten(1) - self.obs_mean) / torch.sqrt(self.obs_var + 1e-8)).clamp(-5, 5)
        hidden = self.encoder(x)
        hero = torch.arange(self.num_heroes, device=x.device).repeat(x.shape[0] // self.num_heroes)
        hidden = hidden + self.hero_embedding(hero)
        # cross-hero max-pool over the first quarter of the features (Figure 17): heroes see each other's state
        pooled = hidden[:, : self.pool_size].reshape(-1, self.num_heroes, self.pool_size).max(1).values
        return torch.cat([hidden, pooled.repeat_interleave(self.num_heroes, 0)], 1)

    def get_states(self, x, lstm_state, done):
        # x: (T * B, *obs_shape) in time-major order; lstm_state: ((1, B, H), (1, B, H)); done: (T * B,)
        hidden = self.embed(x)
        batch_size = lstm_state[0].shape[1]
        hidden = hidden.reshape((-1, batch_size, self.lstm.input_size))
        done = done.reshape((-1, batch_size))
        new_hidden = []
        for h, d in zip(hidden, done, strict=True):
            # reset the LSTM state of a hero whose game ended before this step
            h, lstm_state = self.lstm(
                h.unsqueeze(0),
                ((1.0 - d).view(1, -1, 1) * lstm_state[0], (1.0 - d).view(1, -1, 1) * lstm_state[1]),
            )
            new_hidden += [h]
        new_hidden = torch.flatten(torch.cat(new_hidden), 0, 1)
        return new_hidden, lstm_state

    def get_value(self, x, lstm_state, done):
        hidden, _ = self.get_states(x, lstm_state, done)
        return self.critic(hidden)

    def get_action_and_value(self, x, lstm_state, done, mask, action=None):
        hidden, lstm_state = self.get_states(x, lstm_state, done)
        # invalid action masking: illegal logits are set to a large negative number before the softmax
        logits = self.actor(hidden).masked_fill(~mask, -1e8)
        probs = torch.distributions.Categorical(logits=logits, validate_args=False)  # faults: see the NaN check
        if action is None:
            if not probs.logits.isfinite().all():  # a diverged network can first show here, on new observations
                raise FloatingPointError("non-finite policy logits")
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden), lstm_state


def shape_rewards(scores, weights, is_win, time, tau, args):
    """Per-hero rewards (E, 2, N) from score changes (E, 2, N, C) (OpenAI Five, Appendix G).

    Weighted scores, then zero-sum (r_i -= mean of the enemy heroes), team spirit
    (r_i = (1 - tau) r_i + tau mean(team)) and time decay of everything but the win. All three are linear, so they
    are applied to the win part and to the rest separately, and the rest is decayed at the end.
    """
    parts = np.stack([(scores * weights * is_win).sum(-1), (scores * weights * ~is_win).sum(-1)])  # (2, E, 2, N)
    if args.zero_sum:
        parts = parts - parts[:, :, ::-1].mean(-1, keepdims=True)
    parts = (1 - tau) * parts + tau * parts.mean(-1, keepdims=True)
    decay = args.time_decay ** (time / args.time_decay_seconds)
    return parts[0] + decay[:, None, None] * parts[1]


def load_file(path, flag):
    """A checkpoint or a saved model as a dict, or one clear line and exit code 2."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(saved, dict) or not {"args", "model"} <= saved.keys():
            raise ValueError("not a cleanfive file")
        if not saved["args"].keys() <= Args.__dataclass_fields__.keys():
            raise ValueError("written by another script")
    except Exception as error:
        usage_error(f"cannot read {flag} {path} ({error}); pass a file written by --save-every or --save-model")
    return saved


def play_references(agent, args, evaluator, names, device, rng, video_path=None):
    """TrueSkill evaluation (Appendix J): `eval_games` games against each reference in `names`.

    Returns {reference: (wins, draws, losses) as fractions}. With `video_path`, game 0 against the first reference
    is saved as a GIF (every 4th step).
    """
    env = make_team_env(args.env_id, args.eval_games, int(rng.integers(2**31)), args.num_heroes)
    E, N = args.eval_games, args.num_heroes
    rows = np.arange(E)
    results = {}
    for name in names:
        obs, info = env.reset()
        frames, step = [], 0
        agent_side = rows % 2  # the agent plays each side in half of the games
        state = (
            torch.zeros(1, E * N, agent.lstm.hidden_size, device=device),
            torch.zeros(1, E * N, agent.lstm.hidden_size, device=device),
        )
        done = torch.zeros(E * N, device=device)
        scores = np.full(E, np.nan)
        while np.isnan(scores).any():
            with torch.no_grad():
                x = torch.as_tensor(obs[rows, agent_side], device=device).flatten(0, 1)
                mask = torch.as_tensor(info["action_mask"][rows, agent_side], device=device).flatten(0, 1)
                action, _, _, _, state = agent.get_action_and_value(x, state, done, mask)
            actions = np.zeros((E, 2, N), dtype=np.int64)
            actions[rows, agent_side] = action.cpu().numpy().reshape(E, N)
            actions[rows, 1 - agent_side] = env.bot_actions(name, obs, info, 1 - agent_side, rng)
            if video_path and name == names[0] and np.isnan(scores[0]) and step % 4 == 0:
                frames.append(Image.fromarray(env.render(0)))
            step += 1
            obs, _, next_done, info = env.step(actions)
            finished = info["game_over"] & np.isnan(scores)
            scores[finished] = (info["outcome"][finished, agent_side[finished]] + 1) / 2  # 1 win, 0.5 draw, 0 loss
            done = torch.as_tensor(np.repeat(next_done, N), dtype=torch.float32, device=device)
        if frames:
            os.makedirs(os.path.dirname(video_path), exist_ok=True)
            frames[0].save(video_path, save_all=True, append_images=frames[1:], duration=100, loop=0)
        evaluator.update_many(name, scores)
        results[name] = ((scores == 1).mean(), (scores == 0.5).mean(), (scores == 0).mean())
    return results


if __name__ == "__main__":
    launch_time = time.time()
    args = tyro.cli(Args)
    checkpoint = load_file(args.resume, "--resume") if args.resume else None
    env_seed = args.seed
    if checkpoint is not None:
        args = Args(**{**checkpoint["args"], "resume": args.resume})
        # worlds that cannot save their state restart their games with a seed of their own for this update
        env_seed = int(np.random.SeedSequence([args.seed, checkpoint["iteration"]]).generate_state(1)[0] >> 1)
    if args.eval_only:
        saved = load_file(args.eval_only, "--eval-only")
        for key in ("env_id", "num_heroes", "hidden_size"):  # the world and network the model was trained for
            setattr(args, key, saved["args"][key])
    for flag, ok, allowed in (
        ("total-timesteps", args.total_timesteps > 0, "> 0"),
        ("learning-rate", args.learning_rate > 0, "> 0"),
        ("num-envs", args.num_envs > 0, "> 0"),
        ("num-steps", args.num_steps > 0, "> 0"),
        ("bptt-len", args.bptt_len > 0, "> 0"),
        ("horizon-seconds", args.horizon_seconds > 0, "> 0"),
        ("gae-lambda", 0 <= args.gae_lambda <= 1, "in [0, 1]"),
        ("num-minibatches", args.num_minibatches > 0, "> 0"),
        ("update-epochs", args.update_epochs > 0, "> 0"),
        ("clip-coef", args.clip_coef > 0, "> 0"),
        ("policy-lag", args.policy_lag >= 0, ">= 0"),
        ("hidden-size", args.hidden_size >= 4, ">= 4"),
        ("team-spirit-start", 0 <= args.team_spirit_start <= 1, "in [0, 1]"),
        ("team-spirit-end", 0 <= args.team_spirit_end <= 1, "in [0, 1]"),
        ("time-decay", 0 < args.time_decay <= 1, "in (0, 1]"),
        ("past-fraction", 0 <= args.past_fraction <= 1, "in [0, 1]"),
        ("bot-fraction", 0 <= args.bot_fraction <= 1, "in [0, 1]"),
        ("pool-every", args.pool_every > 0, "> 0"),
        ("eval-every", args.eval_every > 0, "> 0"),
        ("eval-games", args.eval_games > 0, "> 0"),
        ("save-every", args.save_every >= 0, ">= 0"),
    ):
        if not ok:
            usage_error(f"--{flag} {getattr(args, flag.replace('-', '_'))} is out of range: it must be {allowed}")
    try:
        envs = make_team_env(args.env_id, args.num_envs, env_seed, args.num_heroes)
    except (ValueError, FootballUnavailable) as error:
        usage_error(str(error))
    if args.capture_video and not hasattr(envs, "render"):
        usage_error(f"--capture-video: {args.env_id} does not render; drop the flag or pick a world that does")
    E, S, N, A = args.num_envs, envs.num_sides, envs.num_heroes, envs.num_actions
    args.num_heroes = N
    args.num_players = P = E * S * N
    args.batch_size = args.num_players * args.num_steps
    args.gamma = 1.0 - envs.seconds_per_step / args.horizon_seconds
    if not 0 < args.gamma < 1:
        usage_error(f"--horizon-seconds {args.horizon_seconds} must exceed one step ({envs.seconds_per_step} s)")
    if args.num_steps % args.bptt_len != 0:
        usage_error(f"--num-steps {args.num_steps} must be a multiple of --bptt-len {args.bptt_len}")
    args.num_sequences = E * S * (args.num_steps // args.bptt_len)
    if args.num_sequences % args.num_minibatches != 0:
        usage_error(
            f"{args.num_sequences} team sequences per rollout (num_envs * 2 * num_steps / bptt_len) "
            f"cannot be split into --num-minibatches {args.num_minibatches}; pick a divisor"
        )
    references = args.references or envs.bot_names
    if unknown := [name for name in references if name not in envs.bot_names]:
        usage_error(f"unknown --references {unknown} for {args.env_id}; its bots are {', '.join(envs.bot_names)}")
    if len(set(references)) < 2:
        usage_error("--references needs at least two different bots: they are rated by games among themselves")
    score_weights = dict(envs.DEFAULT_SCORE_WEIGHTS)
    for item in args.score_weights:
        component, _, value = item.partition("=")
        if component not in score_weights:
            usage_error(f"--score-weights {item}: {args.env_id}'s components are {', '.join(envs.score_names)}")
        try:
            score_weights[component] = float(value)
        except ValueError:
            score_weights[component] = float("nan")
        if not np.isfinite(score_weights[component]):
            usage_error(f"--score-weights {item}: give each weight as name=number")
    args.minibatch_sequences = args.num_sequences // args.num_minibatches
    args.num_iterations = max(1, args.total_timesteps // (args.num_envs * args.num_steps))
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    if checkpoint is not None:
        run_name = checkpoint["run_name"]
    if args.track:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
        )
    # resuming drops the events logged after the checkpoint, so that the curves continue where it was taken
    writer = SummaryWriter(f"runs/{run_name}", purge_step=checkpoint["global_step"] + 1 if checkpoint else None)
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join([f"|{key}|{value}|" for key, value in vars(args).items()]),
    )

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    rng = np.random.default_rng(args.seed)

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup: E games x 2 sides x N heroes, rows ordered (game, side, hero); `done` hides each world's autoreset
    obs_shape = envs.obs_shape
    obs_size = int(np.prod(obs_shape))
    weights = np.array([score_weights[name] for name in envs.score_names], dtype=np.float32)
    is_win = np.array([name == "win" for name in envs.score_names])

    agent = Agent(obs_size, A, N, args.hidden_size).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    grad_sq = [torch.zeros_like(param) for param in agent.parameters()]  # running second moment of the gradient
    grad_steps = 0
    # staleness (Appendix M): rollouts act with the oldest of the last policy_lag + 1 versions (all of them early on)
    versions = [copy.deepcopy(agent.state_dict())] if args.policy_lag else []
    actor = copy.deepcopy(agent) if args.policy_lag else agent

    # the fixed reference pool, rated once by games among the references, the first pinned at mu = 0 (Appendix J)
    if checkpoint is None:
        results = []
        for i, a in enumerate(references):
            for b in references[i + 1 :]:
                scores = play_bots(args.env_id, a, b, args.reference_games, seed=args.seed, num_heroes=N)
                results += [(a, b, float(s)) for s in scores]
        ratings = fit_reference_ratings(results, anchor=references[0])
    else:  # a resumed run keeps the reference ratings it started with
        ratings = {k: rating_from_dict(r) for k, r in checkpoint["evaluator"]["references"].items()}
    evaluator = ReferenceEvaluator(ratings)
    print("reference ratings:", {k: round(float(v.mu), 2) for k, v in evaluator.references.items()})

    if args.eval_only:
        try:
            agent.load_state_dict(saved["model"])
        except RuntimeError as error:
            usage_error(f"--eval-only {args.eval_only} does not fit {args.env_id}: {str(error).splitlines()[0]}")
        video_path = f"videos/{run_name}/eval.gif" if args.capture_video else None
        results = play_references(agent.eval(), args, evaluator, list(references), device, rng, video_path)
        for name, (win, draw, loss) in results.items():
            print(f"vs {name}: win {win:.2f} draw {draw:.2f} loss {loss:.2f} ({args.eval_games} games)")
        print(f"trueskill_mu={evaluator.rating.mu:.2f} sigma={evaluator.rating.sigma:.2f}")
        sys.exit(0)

    # the past-opponent pool (Appendix N): the script keeps the weights, the pool keeps the quality scores
    pool = OpponentPool(eta=args.quality_lr)
    past_agents: list[Agent] = []
    num_past_slots = round(args.past_fraction * E)
    # per game: -1 = latest policy on both sides, k >= 0 = past version k of the pool, -2 - b = references[b]
    opponent = np.full(E, -1)
    learner_side = np.zeros(E, dtype=np.int64)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, P) + obs_shape).to(device)
    masks = torch.zeros((args.num_steps, P, A), dtype=torch.bool).to(device)
    actions = torch.zeros((args.num_steps, P), dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, P)).to(device)
    rewards = torch.zeros((args.num_steps, P)).to(device)
    dones = torch.zeros((args.num_steps, P)).to(device)
    values = torch.zeros((args.num_steps, P)).to(device)
    acting = torch.zeros((args.num_steps, P)).to(device)  # this hero's action is applied (policy-loss weight)
    learner = torch.zeros((args.num_steps, P)).to(device)  # the latest policy drives this hero (value-loss weight)
    num_chunks = args.num_steps // args.bptt_len
    chunk_h = torch.zeros((num_chunks, P, args.hidden_size)).to(device)
    chunk_c = torch.zeros((num_chunks, P, args.hidden_size)).to(device)
    # reward scaling: running variance of each hero's discounted return
    discounted_return = np.zeros((E, S, N))
    return_var, return_count = torch.ones(()), torch.tensor(1e-4)
    return_mean = torch.zeros(())

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = last_print = time.time()
    next_obs_np, info = envs.reset()
    next_obs = torch.as_tensor(next_obs_np.reshape((P,) + obs_shape), device=device)
    next_mask = torch.as_tensor(info["action_mask"].reshape(P, A), device=device)
    next_acting = torch.as_tensor(info["acting"].reshape(P), dtype=torch.float32, device=device)
    next_done = torch.zeros(P).to(device)
    next_lstm_state = (
        torch.zeros(agent.lstm.num_layers, P, agent.lstm.hidden_size).to(device),
        torch.zeros(agent.lstm.num_layers, P, agent.lstm.hidden_size).to(device),
    )
    side_of_player = np.tile(np.repeat(np.arange(S), N), E)
    env_of_player = np.repeat(np.arange(E), S * N)

    def learner_rows():
        """Per hero: its game's `opponent` code, and whether the latest policy drives it."""
        player_opponent = opponent[env_of_player]
        return player_opponent, (player_opponent == -1) | (side_of_player == learner_side[env_of_player])

    game_scores = np.zeros((E, S, len(envs.score_names)))  # each side's score components in the game so far

    start_iteration, checkpoint_path, last_good = 0, f"runs/{run_name}/checkpoint.pt", args.resume

    def numerical_fault_hook(kind, error, traceback):
        """A network that diverged can first show when it samples (rollout or evaluation): the same one line."""
        if not issubclass(kind, FloatingPointError):
            return sys.__excepthook__(kind, error, traceback)
        print(numerical_fault_line(globals().get("iteration", start_iteration), last_good), file=sys.stderr)

    sys.excepthook = numerical_fault_hook
    if checkpoint is not None:  # everything that decides what comes next, as it was after update `iteration`
        start_iteration, global_step = checkpoint["iteration"], checkpoint["global_step"]
        agent.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        grad_sq, grad_steps = [v.to(device) for v in checkpoint["grad_sq"]], checkpoint["grad_steps"]
        versions = [{k: v.to(device) for k, v in version.items()} for version in checkpoint.get("versions", [])]
        return_mean, return_var, return_count = checkpoint["return_moments"]
        evaluator.load_state_dict(checkpoint["evaluator"])
        pool.load_state_dict(checkpoint["pool"])
        for state in checkpoint["past_agents"]:
            past_agents.append(copy.deepcopy(agent).eval())
            past_agents[-1].load_state_dict(state)
        if "world" in checkpoint:  # the lane world saves its state: the games in progress go on bit for bit
            envs.load_state_dict(checkpoint["world"])
            next_obs, next_mask, next_acting, next_done = (x.to(device) for x in checkpoint["next"][:4])
            next_lstm_state = tuple(x.to(device) for x in checkpoint["next"][4])
            discounted_return, game_scores, opponent, learner_side = checkpoint["games"]
        random.setstate(checkpoint["rng"][0])
        np.random.set_state(checkpoint["rng"][1])
        torch.set_rng_state(checkpoint["rng"][2])
        rng.bit_generator.state = checkpoint["rng"][3]
        print(f"resumed from {args.resume} at update {start_iteration} (global_step {global_step})")
    start_step = global_step
    player_opponent, is_learner_np = learner_rows()

    for iteration in range(start_iteration + 1, args.num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / args.num_iterations
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate
        ent_coef = args.ent_coef_final + frac * (args.ent_coef - args.ent_coef_final)
        tau = args.team_spirit_end + frac * (args.team_spirit_start - args.team_spirit_end)
        finished = []  # rows of (opponent, learner outcome, game length, team scores...) of games ended in this rollout
        if args.policy_lag:
            actor.load_state_dict(versions[0])

        for step in range(0, args.num_steps):
            if step % args.bptt_len == 0:  # truncated BPTT: remember the state each training sequence starts from
                chunk_h[step // args.bptt_len] = next_lstm_state[0][0]
                chunk_c[step // args.bptt_len] = next_lstm_state[1][0]
            global_step += E
            obs[step] = next_obs
            masks[step] = next_mask
            dones[step] = next_done
            acting[step] = next_acting
            learner[step] = torch.as_tensor(is_learner_np, dtype=torch.float32, device=device)

            # ALGO LOGIC: action logic
            with torch.no_grad():
                prev_state = next_lstm_state
                action, logprob, _, value, next_lstm_state = actor.get_action_and_value(
                    next_obs, prev_state, next_done, next_mask
                )
                values[step] = value.flatten()
                for k in np.unique(opponent[opponent >= 0]):  # past versions drive their side of their games
                    rows = torch.as_tensor(np.flatnonzero((player_opponent == k) & ~is_learner_np), device=device)
                    past_action, _, _, _, past_state = past_agents[k].get_action_and_value(
                        next_obs[rows],
                        (prev_state[0][:, rows], prev_state[1][:, rows]),
                        next_done[rows],
                        next_mask[rows],
                    )
                    action[rows] = past_action
                    next_lstm_state[0][:, rows], next_lstm_state[1][:, rows] = past_state
                for b in np.unique(opponent[opponent <= -2]):  # reference bots drive their side of their games
                    games = np.flatnonzero(opponent == b)
                    bot = envs.bot_actions(references[-2 - b], next_obs_np, info, 1 - learner_side, rng)[games]
                    rows = ((games * S + 1 - learner_side[games])[:, None] * N + np.arange(N)).reshape(-1)
                    action[torch.as_tensor(rows, device=device)] = torch.as_tensor(bot.reshape(-1), device=device)
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs_np, scores, next_done_np, info = envs.step(action.cpu().numpy().reshape(E, S, N))
            reward = shape_rewards(scores, weights, is_win, info["time"], tau, args)
            game_scores += scores.sum(2)
            if args.norm_reward:
                discounted_return = discounted_return * args.gamma + reward
                return_mean, return_var, return_count = update_moments(
                    return_mean, return_var, return_count, torch.as_tensor(discounted_return.reshape(P))
                )
                discounted_return[next_done_np] = 0.0
                reward = reward / np.sqrt(return_var.item() + 1e-8)
            rewards[step] = torch.as_tensor(reward.reshape(P), dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs_np.reshape((P,) + obs_shape), device=device)
            next_mask = torch.as_tensor(info["action_mask"].reshape(P, A), device=device)
            next_acting = torch.as_tensor(info["acting"].reshape(P), dtype=torch.float32, device=device)
            next_done = torch.as_tensor(np.repeat(next_done_np, S * N), dtype=torch.float32, device=device)

            over = np.flatnonzero(info["game_over"])
            if over.size:
                side = np.where(opponent[over] != -1, learner_side[over], 0)
                outcome = info["outcome"][over, side]
                finished.append(
                    np.concatenate(
                        [np.stack([opponent[over], outcome, info["game_length"][over]], 1), game_scores[over, side]], 1
                    )
                )
                game_scores[over] = 0.0
                for k in opponent[over][(opponent[over] >= 0) & (outcome > 0)]:
                    pool.record_win(k)  # quality update: q_i -= eta / (N p_i) when the learner beats past version i
                # next game of each finished env: latest vs latest, or (past slots) vs a sampled past version
                past = over[over < num_past_slots]
                opponent[over] = -1
                if len(pool.keys) > 0 and past.size > 0:
                    opponent[past] = pool.sample(rng, past.size)
                    learner_side[past] = rng.integers(S, size=past.size)
                if args.bot_fraction > 0:  # the bot curriculum: a share of the other games, annealed to 0
                    other = over[over >= num_past_slots]
                    vs_bot = other[rng.random(other.size) < args.bot_fraction * frac]
                    opponent[vs_bot] = -2 - rng.integers(len(references), size=vs_bot.size)
                    learner_side[vs_bot] = rng.integers(S, size=vs_bot.size)
                player_opponent, is_learner_np = learner_rows()

        if finished:
            finished = np.concatenate(finished)
            for outcome, length in finished[:, 1:3]:
                writer.add_scalar("charts/episodic_return", outcome, global_step)
                writer.add_scalar("charts/episodic_length", length, global_step)
            for name, value in zip(envs.score_names, finished[:, 3:].mean(0), strict=True):  # the learner's team
                writer.add_scalar(f"scores/{name}", value, global_step)
            if (finished[:, 0] >= 0).any():
                writer.add_scalar("league/winrate_vs_past", (finished[finished[:, 0] >= 0, 1] > 0).mean(), global_step)
            if (finished[:, 0] <= -2).any():
                writer.add_scalar("league/winrate_vs_bots", (finished[finished[:, 0] <= -2, 1] > 0).mean(), global_step)

        # bootstrap value if not done
        with torch.no_grad():
            next_value = actor.get_value(next_obs, next_lstm_state, next_done).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        # flatten the batch into BPTT sequences: (bptt_len, num_chunks * P, ...), sequence = (chunk, player); the N
        # heroes of a team are consecutive, so team sequence j holds the player sequences j * N ... j * N + N - 1
        def to_seq(x):
            return (
                x.reshape((num_chunks, args.bptt_len, P) + x.shape[2:])
                .transpose(0, 1)
                .reshape((args.bptt_len, num_chunks * P) + x.shape[2:])
            )

        b_obs, b_masks, b_actions, b_logprobs = to_seq(obs), to_seq(masks), to_seq(actions), to_seq(logprobs)
        b_dones, b_advantages, b_returns, b_values = to_seq(dones), to_seq(advantages), to_seq(returns), to_seq(values)
        b_pg_w = to_seq(acting * learner)  # the policy learns from its own applied actions only
        b_v_w = to_seq(learner)
        b_h, b_c = chunk_h.reshape(num_chunks * P, -1), chunk_c.reshape(num_chunks * P, -1)

        # Optimizing the policy and value network
        seq_inds = np.arange(args.num_sequences)
        clipfracs = []
        finite = torch.tensor(True, device=device)  # numerical faults, checked once after the update
        for _epoch in range(args.update_epochs):
            np.random.shuffle(seq_inds)
            for start in range(0, args.num_sequences, args.minibatch_sequences):
                mb_teams = seq_inds[start : start + args.minibatch_sequences]
                mb = (mb_teams[:, None] * N + np.arange(N)).reshape(-1)  # whole teams, for the cross-hero max-pool
                _, newlogprob, entropy, newvalue, _ = agent.get_action_and_value(
                    b_obs[:, mb].reshape((-1,) + obs_shape),
                    (b_h[mb].unsqueeze(0), b_c[mb].unsqueeze(0)),
                    b_dones[:, mb].reshape(-1),
                    b_masks[:, mb].reshape(-1, A),
                    b_actions[:, mb].reshape(-1),
                )
                pg_w, v_w = b_pg_w[:, mb].reshape(-1), b_v_w[:, mb].reshape(-1)
                pg_n, v_n = pg_w.sum().clamp(min=1), v_w.sum().clamp(min=1)
                logratio = newlogprob - b_logprobs[:, mb].reshape(-1)
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = ((-logratio) * pg_w).sum() / pg_n
                    approx_kl = (((ratio - 1) - logratio) * pg_w).sum() / pg_n
                    clipfracs += [((((ratio - 1.0).abs() > args.clip_coef).float() * pg_w).sum() / pg_n).item()]

                mb_advantages = b_advantages[:, mb].reshape(-1)
                if args.norm_adv:  # statistics over the applied learner actions only
                    mean = (mb_advantages * pg_w).sum() / pg_n
                    std = ((((mb_advantages - mean) ** 2) * pg_w).sum() / pg_n).sqrt()
                    mb_advantages = (mb_advantages - mean) / (std + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = (torch.max(pg_loss1, pg_loss2) * pg_w).sum() / pg_n

                # Value loss
                newvalue = newvalue.view(-1)
                mb_returns, mb_values = b_returns[:, mb].reshape(-1), b_values[:, mb].reshape(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - mb_returns) ** 2
                    v_clipped = mb_values + torch.clamp(newvalue - mb_values, -args.clip_coef, args.clip_coef)
                    v_loss_clipped = (v_clipped - mb_returns) ** 2
                    v_loss = 0.5 * (torch.max(v_loss_unclipped, v_loss_clipped) * v_w).sum() / v_n
                else:
                    v_loss = 0.5 * (((newvalue - mb_returns) ** 2) * v_w).sum() / v_n

                entropy_loss = (entropy * pg_w).sum() / pg_n
                loss = pg_loss - ent_coef * entropy_loss + v_loss * args.vf_coef
                finite &= loss.isfinite()

                optimizer.zero_grad()
                loss.backward()
                if args.clip_grad_per_param:  # OpenAI Five: each entry to +-5 sqrt(v), v of the unclipped gradients
                    grad_steps += 1
                    beta2 = optimizer.defaults["betas"][1]
                    bias = 1 - beta2**grad_steps
                    for param, v in zip(agent.parameters(), grad_sq, strict=True):
                        v.mul_(beta2).add_((1 - beta2) * param.grad**2)
                        limit = 5 * torch.sqrt(v / bias)
                        param.grad.copy_(torch.maximum(torch.minimum(param.grad, limit), -limit))
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None and approx_kl > args.target_kl:
                break

        if args.norm_obs:  # after the update, so that the ratio starts at 1: stats from this rollout's learner rows
            agent.update_obs_stats(obs[learner.bool()])
        if args.policy_lag:  # the version the rollout policy_lag updates from now acts with
            versions = versions[-args.policy_lag :] + [copy.deepcopy(agent.state_dict())]

        # numerical faults: the losses, the parameters and the outputs the next rollout starts from must be finite
        with torch.no_grad():
            hidden, _ = agent.get_states(next_obs, next_lstm_state, next_done)
            finite &= torch.stack([param.isfinite().all() for param in agent.parameters()]).all()
            finite &= agent.actor(hidden).isfinite().all() & agent.critic(hidden).isfinite().all()
        if not finite:
            print(numerical_fault_line(iteration, last_good), file=sys.stderr)
            sys.exit(1)

        y_pred, y_true = b_values.flatten(), b_returns.flatten()
        var_y = y_true.var()
        explained_var = np.nan if var_y == 0 else (1 - (y_true - y_pred).var() / var_y).item()

        # self-play: the current policy joins the past-opponent pool every K updates with quality max(q)
        if iteration % args.pool_every == 0:
            past_agents.append(copy.deepcopy(agent).eval())
            pool.add(f"v{iteration}")
            probs = pool.probabilities()
            writer.add_scalar("league/pool_size", len(pool.keys), global_step)
            writer.add_scalar("league/opponent_entropy", float(-(probs * np.log(probs)).sum()), global_step)
            writer.add_histogram("league/opponent_probabilities", probs, global_step)

        # TrueSkill evaluation against the fixed references
        if iteration % args.eval_every == 0 or iteration == args.num_iterations:
            video_path = f"videos/{run_name}/update_{iteration}.gif" if args.capture_video else None
            results = play_references(agent, args, evaluator, evaluator.choose(), device, rng, video_path)
            rating = evaluator.finish_version(iteration)  # the next version starts from this mu, sigma reset
            writer.add_scalar("charts/trueskill_mu", rating.mu, global_step)
            writer.add_scalar("charts/trueskill_sigma", rating.sigma, global_step)
            for name, (win, _, _) in results.items():
                writer.add_scalar(f"eval/winrate_{name}", win, global_step)
            if not args.quiet:
                print(
                    f"eval time={time.time() - launch_time:.1f}s global_step={global_step} "
                    f"trueskill_mu={rating.mu:.2f} sigma={rating.sigma:.2f} "
                    + " ".join(f"win_vs_{k}={v[0]:.2f}" for k, v in results.items()),
                    flush=True,
                )

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        sps = int((global_step - start_step) / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("charts/ent_coef", ent_coef, global_step)
        writer.add_scalar("charts/team_spirit", tau, global_step)
        writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
        writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
        writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
        writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
        writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
        writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if not args.quiet and (time.time() - last_print > 10 or iteration == args.num_iterations):
            last_print = time.time()
            eta = (args.num_iterations - iteration) * (last_print - start_time) / (iteration - start_iteration)
            print(f"iteration {iteration}/{args.num_iterations} global_step={global_step} SPS={sps} ETA={eta:.0f}s")

        # checkpoint (atomic: a temporary file, then a rename) holding everything the next update depends on
        if args.save_every and (iteration % args.save_every == 0 or iteration == args.num_iterations):
            state = {
                "args": vars(args),
                "run_name": run_name,
                "iteration": iteration,
                "global_step": global_step,
                "model": agent.state_dict(),
                "optimizer": optimizer.state_dict(),
                "grad_sq": grad_sq,
                "grad_steps": grad_steps,
                "versions": versions,
                "return_moments": (return_mean, return_var, return_count),
                "evaluator": evaluator.state_dict(),
                "pool": pool.state_dict(),
                "past_agents": [past.state_dict() for past in past_agents],
                "rng": (random.getstate(), np.random.get_state(), torch.get_rng_state(), rng.bit_generator.state),
            }
            if hasattr(envs, "state_dict"):
                state["world"] = envs.state_dict()
                state["next"] = (next_obs, next_mask, next_acting, next_done, next_lstm_state)
                state["games"] = (discounted_return, game_scores, opponent, learner_side)
            writer.flush()  # everything logged up to this update is on disk with the checkpoint
            torch.save(state, checkpoint_path + ".tmp")
            os.replace(checkpoint_path + ".tmp", checkpoint_path)
            last_good = checkpoint_path

    if args.save_model:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanfive_model"
        torch.save({"args": vars(args), "model": agent.state_dict()}, model_path + ".tmp")
        os.replace(model_path + ".tmp", model_path)
        print(f"model saved to {model_path}")

    writer.close()
