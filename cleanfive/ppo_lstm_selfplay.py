# docs and experiment results: docs/ppo_lstm_selfplay.md (mkdocs site: `uv run --all-extras mkdocs serve`)
import argparse
import copy
import hashlib
import os
import random
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.utils.tensorboard import SummaryWriter

from cleanfive.envs.evaluation import play_references, print_reference_table, trained_bots
from cleanfive.envs.football import FootballUnavailable
from cleanfive.envs.matchmaking import BOT, PAST, Matchmaking
from cleanfive.envs.teams import TEAM_ENV_IDS, held_out_bots, make_team_env, plays, rate_bots, world_defaults
from cleanfive.trueskill_league import OpponentPool, ReferenceEvaluator, rating_from_dict


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]  # the name of this experiment
    seed: int = 1  # seed of the experiment
    torch_deterministic: bool = True  # if toggled, `torch.backends.cudnn.deterministic=True`
    cuda: bool = True  # if toggled, cuda will be enabled when available
    track: bool = False  # if toggled, this experiment will be tracked with Weights and Biases
    wandb_project_name: str = "cleanfive"  # the wandb's project name
    wandb_entity: str | None = None  # the entity (team) of wandb's project
    capture_video: bool = False  # save a GIF of one game per evaluation to `videos/{run_name}` (worlds that render)
    save_model: bool = False  # whether to save the final model (with its `Args`) into `runs/{run_name}`
    save_every: int = 20  # write `runs/{run_name}/checkpoint.pt` atomically every this many updates (0: never)
    resume: str | None = None  # continue from a checkpoint with its `Args` (the other flags are ignored)
    eval_only: str | None = None  # rate a `--save-model` file (or a checkpoint) against every reference

    # Algorithm specific arguments

    # the two-sided world (one of cleanfive.envs.teams.TEAM_ENV_IDS); the flags marked (world) hold Connect
    # Four's values here, another world's where --env-id names it (envs/teams.py: world_defaults), as --help shows
    env_id: str = "ConnectFour-v1"
    num_heroes: int = 1  # heroes per side, sharing one policy (world)
    # total environment steps (a step moves every hero of both sides of one game) (world)
    total_timesteps: int = 3_000_000
    learning_rate: float = 2e-3  # the learning rate of the optimizer (world)
    num_envs: int = 64  # parallel games of each process (world; torchrun: K processes, K times as many)
    num_steps: int = 64  # the number of steps of each rollout segment (segments do not wait for games to end)
    bptt_len: int = 16  # truncated BPTT: the length of each training sequence, cut from the segment
    anneal_lr: bool = True  # toggle learning rate annealing
    horizon_seconds: float = 10.0  # horizon H in game seconds: gamma = 1 - T / H, T a step's seconds (world)
    gae_lambda: float = 0.95  # the lambda for the general advantage estimation
    num_minibatches: int = 4  # the number of mini-batches (world)
    update_epochs: int = 4  # the K epochs to update the policy
    norm_adv: bool = True  # toggles advantages normalization
    clip_coef: float = 0.2  # the surrogate clipping coefficient
    clip_vloss: bool = True  # toggles whether or not to use a clipped loss for the value function
    ent_coef: float = 0.01  # coefficient of the entropy at the start
    ent_coef_final: float = 0.001  # the entropy coefficient at the end, annealed linearly (OpenAI Five: 0.01 -> 0.001)
    vf_coef: float = 0.5  # coefficient of the value function
    max_grad_norm: float = 0.5  # the maximum norm for the gradient clipping
    clip_grad_per_param: bool = False  # OpenAI Five: each gradient entry to +-5 sqrt(v), v its running 2nd moment
    target_kl: float | None = None  # the target KL divergence threshold
    policy_lag: int = 0  # staleness (Appendix M): rollouts act with the parameters of K updates ago (0: the latest)
    hidden_size: int = 128  # width of the MLP encoder and of the LSTM
    # board games: each move's logit also from the convolution features at the square it fills, with one
    # weight for all squares (a pattern learned in one place is known in all); off in the team worlds
    square_head: bool = True
    # board games: learn from each rollout and its left-right mirror image (augmentation); off in team worlds
    mirror: bool = True
    # board games: a training game opens with 0 to k uniform random moves, which cannot decide it (k = 6 in
    # Connect Four, 4 in TicTacToe) and are not learnt from; evaluations start empty. Not OpenAI Five's
    random_openings: bool = True

    # Reward shaping of the team worlds (OpenAI Five, Appendix G): score weights, then these, in this order

    score_weights: tuple[str, ...] = ()  # overrides of the world's score weights, e.g. `wrong_lane=0 deaths=-0.5`
    team_spirit_start: float = 0.3  # team spirit tau at the start: r_i <- (1 - tau) r_i + tau mean(team)
    team_spirit_end: float = 1.0  # team spirit tau at the end, annealed linearly (OpenAI Five: 0.3 -> 1.0)
    time_decay: float = 0.6  # rewards other than the win are multiplied by time_decay ** (t / time_decay_seconds)
    time_decay_seconds: float = 100.0  # game seconds per factor time_decay (OpenAI Five: 10 min of ~45-min games)

    # Self-play (OpenAI Five, Appendix N)
    past_fraction: float = 0.2  # fraction of games against past versions (the rest: bots or latest vs latest)
    pool_every: int = 10  # add the current policy to the past-opponent pool every this many updates
    quality_lr: float = 0.01  # eta of the quality-score update q_i -= eta / (N p_i)
    # fraction of the other games played against the bot opponents, annealed linearly from bot_fraction to
    # bot_fraction_end (equal: a fixed mix); not in OpenAI Five's recipe (0 and 0: self-play only) (world)
    bot_fraction: float = 0.5
    bot_fraction_end: float = 0.5
    # the bots of the bot games, perturbed ones too (e.g. search2+random30, which stay); the world's
    # bots that are not references are left out; (): every reference (world)
    bot_opponents: tuple[str, ...] = ("random", "greedy", "lookahead", "search1", "search2", "search3")

    # TrueSkill evaluation against fixed references (OpenAI Five, Appendix J)

    references: tuple[str, ...] = ()  # scripted reference bots, the first the anchor at mu = 0 (empty: the world's)
    reference_games: int = 400  # games per pair of references to rate the reference pool once at start
    eval_every: int = 10  # evaluate against the references every this many updates (world)
    eval_games: int = 64  # games per chosen reference at each evaluation

    # to be filled in runtime
    batch_size: int = 0  # the batch size of each process (computed in runtime)
    num_iterations: int = 0  # the number of iterations (computed in runtime)


BOARD_CHANNELS = 32  # the board games' encoder: two 3x3 convolutions of this many channels, then one dense layer
BOARD_MAPS = 5  # its first layers (Unflatten, the two convolutions and their ReLUs) give each square's features
# a checkpoint's keys (--save-every, --resume): all the next update depends on; under "ranks", each process's
# generators, reward statistics and, in a world that saves its state (the lane world), its games in progress
CHECKPOINT_KEYS = ("run_name", "iteration", "global_step", "model", "optimizer", "grad_sq", "grad_steps")
CHECKPOINT_KEYS += ("versions", "evaluator", "eval_generator", "pool", "past_agents", "ranks")


# RUN MANAGEMENT (TRY NOT TO MODIFY: the same block in every cleanfive script, so that no diff between two shows it)
NDARRAY = "__ndarray__"  # a NumPy array in a saved file: {NDARRAY: tensor}, which weights_only=True reads (to_plain)


def usage_error(message: str, code: int = 2) -> None:
    print(f"error: {message}", file=sys.stderr)  # one clear line, no traceback; exit code 2: a user error
    sys.exit(code)


def check(ok: bool, message: str) -> None:
    if not ok:
        usage_error(message)


def load_saved(path: str, flag: str, keys: tuple[str, ...]) -> dict:
    try:  # a file of this script's that holds `keys`, read as data (weights_only=True reads no code)
        saved = to_plain(torch.load(path, map_location="cpu", weights_only=True), inverse=True)
        if saved.get("script") != os.path.basename(__file__):
            raise ValueError(f"it was written by {saved.get('script')}")
        if missing := [key for key in ("args", *keys) if key not in saved]:
            raise KeyError(f"it holds no {missing}")
        Args(**saved["args"])
    except Exception as exc:
        refuse(flag, path, exc, "a file of this script's --save-model or --save-every")
    return saved


def refuse(flag: str, path: str, exc: Exception, wanted: str) -> None:
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
    if "GLOBAL" in str(exc):  # weights_only refused a pickled class or function: an older file, or code
        reason = "it holds objects other than tensors and plain values"
    usage_error(f"cannot use {flag} {path} ({reason}); pass {wanted} (an older one: cleanfive/convert_saved.py)")


def to_plain(tree, inverse: bool = False):
    if inverse and isinstance(tree, dict) and set(tree) == {NDARRAY}:
        return tree[NDARRAY].numpy()
    if not inverse and isinstance(tree, np.ndarray | np.generic):  # NumPy scalars as Python numbers
        return {NDARRAY: torch.from_numpy(tree.copy())} if isinstance(tree, np.ndarray) else tree.item()
    if isinstance(tree, dict):
        return type(tree)((key, to_plain(value, inverse)) for key, value in tree.items())
    return type(tree)(to_plain(value, inverse) for value in tree) if isinstance(tree, list | tuple) else tree


def atomic_save(obj: dict, path: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"  # this process's file, then a rename: no reader sees a half-written file
    torch.save(to_plain({"script": os.path.basename(__file__), **obj}), tmp)
    os.replace(tmp, path)


def rng_states() -> dict:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return {"random": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(), "cuda": cuda}


def set_rng_states(states: dict) -> None:
    random.setstate(states["random"])
    np.random.set_state(states["numpy"])
    torch.set_rng_state(states["torch"])
    if states["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def fault_stop(iteration: int, last_checkpoint: str | None) -> None:
    good = last_checkpoint or "none (use --save-every)"  # a diverged run: one line, exit code 1
    usage_error(f"non-finite loss or parameters at update {iteration}; stopped. Last good checkpoint: {good}", 1)


# END OF RUN MANAGEMENT


def params_sha256(model: nn.Module) -> str:
    """A hash of every parameter and buffer in state_dict order: equal hashes <=> bit-identical models."""
    digest = hashlib.sha256()
    for key, value in model.state_dict().items():
        digest.update(key.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def update_moments(mean, var, count, batch):
    """Running mean and variance over the rows of `batch`, merged with the parallel-variance formula; a batch
    without rows (a rollout in which the learner never acted) leaves them as they are."""
    if len(batch) == 0:
        return mean, var, count
    batch_mean, batch_var, batch_count = batch.mean(0), batch.var(0, unbiased=False), batch.shape[0]
    delta, total = batch_mean - mean, count + batch_count
    new_mean = mean + delta * batch_count / total
    new_var = (var * count + batch_var * batch_count + delta**2 * count * batch_count / total) / total
    return new_mean, new_var, total


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def masked_lstm(lstm, hidden, done, active, lstm_state):
    """What get_states computes, one step at a time; lstm_step, stretched_lstm and padded_lstm compute it
    faster (a test checks). hidden (T, B, features); done, active (T, B). A game end before a step zeroes
    the state; a hero that acts takes an LSTM step, one that waits keeps its state and outputs zeros.
    Returns (outputs (T, B, H), the state after the last step)."""
    (h, c), outputs = lstm_state, []
    for t in range(len(done)):
        kept, acts = (1.0 - done[t]).view(1, -1, 1), active[t].view(1, -1, 1)
        out, (new_h, new_c) = lstm(hidden[t : t + 1], (kept * h, kept * c))
        h, c = torch.where(acts, new_h, kept * h), torch.where(acts, new_c, kept * c)
        outputs.append(torch.where(acts, out, 0.0))
    return torch.cat(outputs), (h, c)


def lstm_step(lstm, hidden, b, done, lstm_state):
    """masked_lstm for one step (T = 1: rollouts, evaluations, bootstrap values): hidden (K, features) of the
    acting heroes b (K,); done (B,): a game ended before the step. Returns (outputs (K, H), the state after it)."""
    h, c = (s * (1.0 - done).view(1, -1, 1) for s in lstm_state)  # a game end zeroes the state
    out, (h_b, c_b) = lstm(hidden.unsqueeze(0), (h[:, b], c[:, b]))  # the heroes that wait keep theirs
    return out[0], (h.index_copy(1, b, h_b), c.index_copy(1, b, c_b))


def stretched_lstm(lstm, hidden, done, lstm_state):
    """masked_lstm's outputs (T, B, H) for training sequences in which every hero acts at every step (the team
    worlds): one LSTM call for each stretch of steps without a game end (padded_lstm gives the same, at
    0.91x the lane world's steps a second: docs/research-log.md)."""
    starts = [0] + [t + 1 for t, cut in enumerate((done[1:] > 0).any(1).tolist()) if cut]
    lengths = [end - start for start, end in zip(starts, starts[1:] + [len(done)], strict=True)]
    (h, c), outputs = lstm_state, []
    for start, stretch in zip(starts, hidden.split(lengths), strict=True):  # split: one backward concat
        kept = (1.0 - done[start]).view(1, -1, 1)  # 0 where a game ended before the stretch
        out, (h, c) = lstm(stretch, (kept * h, kept * c))
        outputs.append(out)
    return torch.cat(outputs)


def padded_lstm(lstm, hidden, t, b, done, lstm_state):
    """masked_lstm's outputs (K, H) for training sequences, over the K active hero-steps in one padded LSTM call:
    hidden (K, features) of step t (K,) of hero b (K,), sorted hero by hero, each hero's in time order
    (get_states sorts them); done (T, B). A sequence is one hero's active steps between two game ends; it starts
    from the hero's carried state, or from zero after a game end.

    Example (a test checks it), T = 4: hero 0 acts at steps 0, 1 and 3, and its game ends before step 2;
    hero 1 acts at steps 1 and 2. The K = 5 hero-steps (t, b) are (0, 0), (1, 0), (3, 0), (1, 1), (2, 1).
    They form Q = 3 sequences: hero 0's steps 0-1 from its carried state, its step 3 from zero, and hero 1's
    steps 1-2 from its carried state, padded to the longest: (2, 3, features).
    """
    games = done.cumsum(0)  # (T, B): game ends so far, per step and hero
    # the Q sequences, one per (hero, games ended before: 0..T): seq (K,) each step's, lengths (Q,); in the
    # example (T + 1 = 5 keys a hero) sequence_key [0, 0, 1, 5, 5], seq [0, 0, 1, 2, 2], lengths [2, 1, 2]
    sequence_key = b * (len(done) + 1) + games[t, b].long()
    _, seq, lengths = torch.unique_consecutive(sequence_key, return_inverse=True, return_counts=True)
    first = lengths.cumsum(0) - lengths  # (Q,) each sequence's first step among the K (example: [0, 2, 3])
    owner = b[first]  # (Q,) each sequence's hero (example: [0, 0, 1])
    # (K,) each step's place in its sequence (example: [0, 1, 0, 0, 1])
    position = torch.arange(len(t), device=t.device) - first[seq]
    padded = hidden.new_zeros(int(lengths.max()), len(lengths), hidden.shape[1])  # (max length, Q, features)
    padded[position, seq] = hidden
    # (Q,) no game end before the sequence: it starts from the carried state (example: [True, False, True])
    carried = (games[t[first], owner] == 0).view(1, -1, 1)
    # one padded call (on a CPU, oneDNN's fused LSTM, which packed input does not get; docs/speed.md): the
    # zeros after a sequence's end never reach its outputs
    out, _ = lstm(padded, (lstm_state[0][:, owner] * carried, lstm_state[1][:, owner] * carried))
    return out[position, seq]


class Agent(nn.Module):
    def __init__(self, obs_shape, num_actions, num_heroes, hidden_size, move_squares=None):
        super().__init__()
        self.num_heroes, self.obs_shape = num_heroes, obs_shape
        obs_size = int(np.prod(obs_shape))
        # observation normalisation statistics travel with the weights (past versions keep their own)
        self.register_buffer("obs_mean", torch.zeros(obs_size))
        self.register_buffer("obs_var", torch.ones(obs_size))
        self.register_buffer("obs_count", torch.tensor(1e-4))
        if len(obs_shape) == 3:  # a board's planes (C, H, W): 3x3 convolutions see a line of stones anywhere alike
            self.encoder = nn.Sequential(
                nn.Unflatten(1, obs_shape),
                nn.Conv2d(obs_shape[0], BOARD_CHANNELS, 3, padding=1),
                nn.ReLU(),
                nn.Conv2d(BOARD_CHANNELS, BOARD_CHANNELS, 3, padding=1),
                nn.ReLU(),
                nn.Flatten(),
                layer_init(nn.Linear(BOARD_CHANNELS * obs_size // obs_shape[0], hidden_size)),
                nn.ReLU(),
            )
        else:
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
        self.square_head, self.move_squares = None, move_squares  # the world's square of each move (board games)
        # --square-head: a third convolution sees the lines through each square, then a 1x1 convolution gives
        # each square one logit (initialised small, as the actor's)
        if move_squares is not None:
            self.square_head = nn.Sequential(
                nn.Conv2d(BOARD_CHANNELS, BOARD_CHANNELS, 3, padding=1),
                nn.ReLU(),
                layer_init(nn.Conv2d(BOARD_CHANNELS, 1, 1), std=0.01),
            )

    def update_obs_stats(self, x):
        x = x.flatten(1)
        self.obs_mean, self.obs_var, self.obs_count = update_moments(self.obs_mean, self.obs_var, self.obs_count, x)

    def normalize(self, x):
        return ((x.flatten(1) - self.obs_mean) / torch.sqrt(self.obs_var + 1e-8)).clamp(-5, 5)

    def square_logits(self, maps, x):
        # --square-head: (B, A) logits from the board's convolution features `maps`, each at the square its
        # move fills, which the world says (envs/board.py: landing_squares, own_squares)
        squares = self.square_head(maps).flatten(1)  # (B, H * W)
        return squares.gather(1, self.move_squares(x.reshape(-1, *self.obs_shape)))

    def embed(self, x):
        # x: (B, *obs_shape), the N heroes of a team in consecutive rows; returns the LSTM's input and, with
        # --square-head, each move's logit from the square it fills (else None)
        if self.square_head is None:
            hidden, squares = self.encoder(self.normalize(x)), None
        else:  # the board encoder's Unflatten and two convolutions, shared with the head
            maps = self.encoder[:BOARD_MAPS](self.normalize(x))
            hidden, squares = self.encoder[BOARD_MAPS:](maps), self.square_logits(maps, x)
        hero = torch.arange(self.num_heroes, device=x.device).repeat(x.shape[0] // self.num_heroes)
        hidden = hidden + self.hero_embedding(hero)
        # cross-hero max-pool over the first quarter of the features (Figure 17): heroes see each other's
        # state
        pooled = hidden[:, : self.pool_size].reshape(-1, self.num_heroes, self.pool_size).max(1).values
        return torch.cat([hidden, pooled.repeat_interleave(self.num_heroes, 0)], 1), squares

    def get_states(self, x, lstm_state, done, active):
        # x: (T * B, *obs_shape), time-major; lstm_state ((1, B, H), (1, B, H)); done, active: (T * B,). The
        # network runs on active heroes only: not on a board game's waiting side, nor on heroes that another
        # policy drives; their state carries. Returns masked_lstm's outputs (T * B, H), computed faster; its
        # state after a step (T = 1; None after training sequences, T > 1, which no caller reads); and the
        # --square-head logits (0 where a hero waits; None without the head)
        batch_size = lstm_state[0].shape[1]
        done, active = done.reshape((-1, batch_size)), active.reshape((-1, batch_size))
        if len(done) > 1 and active.all():  # training sequences in which every hero acts (the team worlds)
            hidden, squares = self.embed(x)
            hidden = hidden.reshape((-1, batch_size, self.lstm.input_size))
            return stretched_lstm(self.lstm, hidden, done, lstm_state).flatten(0, 1), None, squares
        outputs = x.new_zeros(len(done), batch_size, self.lstm.hidden_size)  # (T, B, H)
        squares = None if self.square_head is None else x.new_zeros(len(x), self.actor.out_features)
        if not active.any():  # no hero acts: each state carries, or resets at a game end
            state = None if len(done) > 1 else tuple(s * (1.0 - done[0]).view(1, -1, 1) for s in lstm_state)
            return outputs.flatten(0, 1), state, squares
        t, b = active.nonzero().unbind(1)  # time-major: embed's max-pool reads each team's rows together
        order = torch.argsort(b * len(done) + t)  # hero by hero, in time order, taken after embed
        hidden, acting_squares = self.embed(x[active.flatten()])
        t, b, hidden = t[order], b[order], hidden[order]
        if squares is not None:
            squares[active.flatten()] = acting_squares
        if len(done) == 1:  # a step (rollouts, evaluations, bootstrap values): the acting heroes' LSTM step
            outputs[t, b], lstm_state = lstm_step(self.lstm, hidden, b, done[0], lstm_state)
        else:  # training sequences (board games; team worlds' games against bots or past versions)
            outputs[t, b], lstm_state = padded_lstm(self.lstm, hidden, t, b, done, lstm_state), None
        return outputs.flatten(0, 1), lstm_state, squares

    def get_value(self, x, lstm_state, done, active):
        hidden, _, _ = self.get_states(x, lstm_state, done, active)
        return self.critic(hidden)

    def get_logits(self, hidden, squares):
        logits = self.actor(hidden)
        return logits if squares is None else logits + squares  # --square-head: plus each move's square logit

    def get_action_and_value(self, x, lstm_state, done, active, mask, action=None):
        hidden, lstm_state, squares = self.get_states(x, lstm_state, done, active)
        # invalid action masking: illegal logits are set to a large negative number before the softmax
        logits = self.get_logits(hidden, squares).masked_fill(~mask, -1e8)
        if action is None:  # nan_to_num: a diverged network samples on; the once-per-update finite check stops the run
            probs = torch.distributions.Categorical(logits=torch.nan_to_num(logits), validate_args=False)
            action = probs.sample()
        else:
            probs = torch.distributions.Categorical(logits=logits, validate_args=False)
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden), lstm_state


def zero_state(agent, batch_size, device):
    """The LSTM state ((1, B, H), (1, B, H)) of `batch_size` heroes at the start of their games."""
    return tuple(torch.zeros(1, batch_size, agent.lstm.hidden_size, device=device) for _ in range(2))


def policy_loss(advantages, ratio, clip_coef):
    """PPO's clipped surrogate objective, negated, per sample (Schulman et al. 2017, eq. 7)."""
    return torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef))


def value_loss(newvalue, values, returns, clip_coef, clip_vloss):
    """Half the squared error of the value head per sample; clipped around the rollout's values (PPO detail 9)."""
    v_loss_unclipped = (newvalue - returns) ** 2
    if not clip_vloss:
        return 0.5 * v_loss_unclipped
    v_clipped = values + torch.clamp(newvalue - values, -clip_coef, clip_coef)
    return 0.5 * torch.max(v_loss_unclipped, (v_clipped - returns) ** 2)


def gae(rewards, values, dones, active, next_value, next_done, left_out, gamma, gae_lambda):
    """Generalized advantage estimation over (T, P) tensors in which a hero decides only where `active`. A step
    on which its team does not act (a board game's waiting side) is no decision (semi-MDP): its value is
    r + gamma V(next) and the advantage passes through it with lambda = 1, so that gamma discounts per step and
    lambda per decision. Example: a hero decides at steps 0 and 2 and waits at step 1; then V(1) = r(1) +
    gamma V(2) and A(0) = r(0) + gamma r(1) + gamma^2 V(2) - V(0) + gamma^2 lambda A(2).
    A hero `left_out` (P,) decided at the last step and waits after it: the steps before bootstrap from its
    value there, and that decision gets no advantage (see `waits_at_end`).
    Returns (advantages, values with those of the waiting steps filled in)."""
    values, advantages, lastgaelam = values.clone(), torch.zeros_like(rewards), 0
    for t in reversed(range(rewards.shape[0])):
        if t == rewards.shape[0] - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        values[t] = torch.where(active[t], values[t], rewards[t] + gamma * nextvalues * nextnonterminal)
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        lam = torch.where(active[t], gae_lambda, 1.0)
        advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        if t == rewards.shape[0] - 1:
            advantages[t] = lastgaelam = torch.where(left_out, 0.0, lastgaelam)
    return advantages, values


def flatten_batch(rollout: dict, mirror=None) -> dict:
    """The update's batch: each rollout tensor (T, P, ...) flattened to rows [step t][row p], as CleanRL's b_
    tensors (the LSTM states (T / bptt_len, P, H): one row a sequence). --mirror (symmetry augmentation, cf.
    Mittal et al., ICRA 2024): `mirror`, the world's, appends the rows' left-right mirror images,
    [copy][step][row]: obs, masks and actions mirrored, the rest shared; an image's old log-probability is its
    row's, the probability its mirrored move was drawn with, so its ratio is an importance ratio (its own old
    log-probability broke the learning: docs/research-log-board.md). Approximations: an image starts from the
    state its row's unmirrored history left, and is normalised with statistics of unmirrored rows."""
    batch = {key: x.flatten(0, 1) for key, x in rollout.items()}
    if mirror is not None:
        obs, masks, actions = mirror(batch["obs"], batch["masks"], batch["actions"])
        images = {"obs": obs, "masks": masks, "actions": actions}
        batch = {key: torch.cat([x, images.get(key, x)]) for key, x in batch.items()}
    return batch


def anneal(start, end, frac):
    """A linear schedule: ``start`` at frac 1 (the first update), ``end`` at frac 0 (after the last)."""
    return end + frac * (start - end)


def discount(seconds_per_step, horizon_seconds):
    """gamma from the reward horizon H (OpenAI Five, Appendix G): H = T / (1 - gamma) for T game seconds a step."""
    return 1.0 - seconds_per_step / horizon_seconds


def team_acting(info, num_heroes):
    """(E * S * N,) bool: every hero of each side of which any hero acts (a board game's side to move)."""
    return np.repeat(info["acting"].any(2), num_heroes, axis=1).reshape(-1)


def shape_rewards(scores, weights, is_win, time, tau, args):
    """Per-hero rewards (E, 2, N) from score changes (E, 2, N, C) (OpenAI Five, Appendix G).

    Weighted scores, then zero-sum (r_i -= mean of the enemy heroes), team spirit
    (r_i = (1 - tau) r_i + tau mean(team)) and time decay of everything but the win. All three are linear, so they
    are applied to the win part and to the rest separately, and the rest is decayed at the end.
    """
    parts = np.stack([(scores * weights * is_win).sum(-1), (scores * weights * ~is_win).sum(-1)])  # (2, E, 2, N)
    parts = parts - parts[:, :, ::-1].mean(-1, keepdims=True)  # zero-sum: [::-1] swaps the two sides
    parts = (1 - tau) * parts + tau * parts.mean(-1, keepdims=True)
    decay = args.time_decay ** (time / args.time_decay_seconds)
    return parts[0] + decay[:, None, None] * parts[1]


def check_args(args: Args, envs, references) -> None:
    """Every check of the arguments, once the world `envs` is made and its defaults fill the flags left unset:
    one line and exit code 2 for the first that fails; nothing is changed (--num-envs: checked before)."""
    positive = ("total_timesteps", "learning_rate", "num_steps", "bptt_len", "horizon_seconds")
    positive += ("num_minibatches", "update_epochs", "clip_coef", "pool_every", "eval_every", "eval_games")
    for name in positive:
        check(getattr(args, name) > 0, f"--{name.replace('_', '-')} {getattr(args, name)} must be > 0")
    unit = ("gae_lambda", "team_spirit_start", "team_spirit_end", "past_fraction", "bot_fraction", "bot_fraction_end")
    for name in unit:
        check(0 <= getattr(args, name) <= 1, f"--{name.replace('_', '-')} {getattr(args, name)} must be in [0, 1]")
    for name in ("policy_lag", "save_every"):
        check(getattr(args, name) >= 0, f"--{name.replace('_', '-')} {getattr(args, name)} must be >= 0")
    check(0 < args.time_decay <= 1, f"--time-decay {args.time_decay} must be in (0, 1]")
    check(not args.capture_video or hasattr(envs, "render"), f"--capture-video: {args.env_id} does not render")
    check(args.hidden_size >= 4, f"--hidden-size {args.hidden_size} must be >= 4")
    step, horizon = envs.seconds_per_step, args.horizon_seconds  # gamma = 1 - step / horizon in (0, 1)
    check(horizon > step, f"--horizon-seconds {horizon} must exceed a step ({step}s)")
    check(args.num_steps % args.bptt_len == 0, f"--bptt-len {args.bptt_len} must divide --num-steps {args.num_steps}")
    unknown = [name for name in references if name not in envs.bot_names]
    check(not unknown, f"unknown --references {unknown} for {args.env_id}; its bots are {', '.join(envs.bot_names)}")
    check(len(set(references)) >= 2, "--references needs at least two different bots, rated by games among themselves")
    unknown = [name for name in args.bot_opponents if not plays(envs, name)]
    check(not unknown, f"unknown --bot-opponents {unknown}; {args.env_id} bots: {' '.join(envs.bot_names)}")


def score_weights_of(args: Args, envs) -> dict:
    """The world's score weights, overridden by --score-weights name=number; one line and exit code 2 for an unknown
    component or a value that is not a finite number."""
    weights = dict(envs.DEFAULT_SCORE_WEIGHTS)
    for item in args.score_weights:
        component, _, value = item.partition("=")
        known = f"{args.env_id}'s components are {', '.join(envs.score_names)}"
        check(component in weights, f"--score-weights {item}: {known}")
        try:
            weights[component] = float(value)
        except ValueError:
            weights[component] = np.nan
        check(np.isfinite(weights[component]), f"--score-weights {item}: give each as name=number")
    return weights


def world_args(argv: list[str]) -> Args:
    """Args whose flags marked (world) hold the settings of the world that --env-id in `argv` names (its
    world_defaults), so that --help and the run show them; an unknown id is refused later, by make_world."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--env-id", "--env_id", default=Args.env_id)
    env_id = parser.parse_known_args(argv)[0].env_id
    return Args(env_id=env_id, **(world_defaults(env_id) if env_id in TEAM_ENV_IDS else {}))


class Torchrun:
    """torchrun (as CleanRL's ppo_atari_multigpu.py): K processes, each with its --num-envs games and seeds; gradients
    averaged; one past-opponent pool (each process applies all quality updates); rank 0 rates and saves. The run's
    collectives are these methods, which in a single process (K = 1) give back what they are given."""

    def __init__(self, args: Args, checkpoint: dict | None):
        self.rank, self.local_rank, size = (int(os.getenv(key, "0")) for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
        self.size = max(size, 1)
        run_ranks = len(checkpoint["ranks"]) if checkpoint else self.size
        check(run_ranks == self.size, f"--resume: resume with as many processes as the run had ({run_ranks})")
        if self.size > 1:
            # torch._dynamo (the optimizer imports it) holds on to a process group made before its import, and then
            # destroy_process_group cannot stop gloo's threads, one of which may abort the exit: import it first
            import torch._dynamo  # noqa: F401

            backend = "nccl" if torch.cuda.is_available() and args.cuda else "gloo"
            if backend == "nccl":  # NCCL's object collectives run on the current device: each process its own
                torch.cuda.set_device(self.local_rank)
            dist.init_process_group(backend)

    def all_gather(self, obj) -> list:
        """Every process's `obj`, in rank order."""
        gathered = [obj] * self.size
        if self.size > 1:
            dist.all_gather_object(gathered, obj)
        return gathered

    def cat(self, tensor):
        """Every process's rows of `tensor`, concatenated in rank order (gathered through the CPU)."""
        if self.size > 1:
            tensor = torch.cat(self.all_gather(tensor.cpu())).to(tensor.device)
        return tensor

    def all_reduce(self, tensor, op: str = "SUM"):
        """`tensor` reduced over the processes in place, op a name of dist.ReduceOp (which a torch built
        without distributed lacks: looked up only under torchrun); returns it."""
        if self.size > 1:
            dist.all_reduce(tensor, getattr(dist.ReduceOp, op))
        return tensor

    def average_gradients(self, parameters) -> None:
        """The mean gradient of all processes in every process, in one all-reduce."""
        if self.size > 1:
            parameters = list(parameters)
            grads = torch.cat([param.grad.flatten() for param in parameters]) / self.size
            dist.all_reduce(grads)
            torch.nn.utils.vector_to_parameters(grads, [param.grad for param in parameters])

    def broadcast(self, tensors) -> None:
        """Rank 0's values of `tensors` in every process, in place."""
        for tensor in tensors if self.size > 1 else ():
            dist.broadcast(tensor, 0)

    def close(self) -> None:
        if self.size > 1:
            # a gloo worker frees its last collective's tensors just after it returns; a free during interpreter
            # shutdown aborts the process (std::terminate), so each waits here (GIL released) for the other
            dist.barrier()
            dist.destroy_process_group()


def make_world(args: Args, checkpoint: dict | None, rank: int):
    """This process's world: E games x 2 sides x N heroes, rows ordered (game, side, hero); `done` hides each world's
    autoreset. On resume, worlds that cannot save their state restart their games with a seed of their own."""
    check(args.env_id in TEAM_ENV_IDS, f"unknown --env-id {args.env_id}; the worlds: {', '.join(TEAM_ENV_IDS)}")
    check(args.num_envs > 0, f"--num-envs {args.num_envs} must be > 0")  # the world is made before check_args
    env_seed = args.seed
    if checkpoint:
        env_seed = int(np.random.SeedSequence([args.seed, checkpoint["iteration"]]).generate_state(1)[0] >> 1)
    try:
        envs = make_team_env(args.env_id, args.num_envs, env_seed + rank, args.num_heroes)
    except (ValueError, FootballUnavailable) as error:
        usage_error(str(error))
    return envs


def resolve_args(args: Args, envs, rank: int, world_size: int):
    """`args` fitted to the world `envs`, in order: the bot games' bots kept to the references, every check,
    the flags the world cannot use turned off and the derived sizes set; rank 0's first line says the world's
    settings (with --eval-only, the saved run's) and what was turned off. Returns (references, held-out bots,
    score weights in the world's score_names' order)."""
    references = args.references or envs.bot_names
    # held-out bots: the board games' perturbed bots, which no default trains against, each on its ladder
    # bot's rung; the summary's robust rung: the strongest whose untrained bots the model beats half the time
    held_out = {bot: rung for bot, rung in held_out_bots(envs).items() if rung in references}
    # the bot games' bots: the world's bots that are not references are left out, and the first line says so
    dropped = [name for name in args.bot_opponents if name in envs.bot_names and name not in references]
    args.bot_opponents = tuple(name for name in args.bot_opponents if name not in dropped)
    check(args.bot_opponents or not dropped, f"--bot-opponents {' '.join(dropped)}: not among the references")
    check_args(args, envs, references)
    score_weights = score_weights_of(args, envs)
    # --mirror, --square-head and --random-openings need a board game: off elsewhere, as the first line says
    usable = dict(mirror=hasattr(envs, "mirror"), square_head=hasattr(envs, "move_squares"))
    usable |= dict(random_openings=hasattr(envs, "random_openings"))
    turned_off = [key for key, ok in usable.items() if getattr(args, key) and not ok]
    for key in turned_off:
        setattr(args, key, False)
    args.batch_size = envs.num_envs * envs.num_sides * envs.num_heroes * args.num_steps  # this process's
    team_sequences = args.batch_size // (envs.num_heroes * args.bptt_len)  # per rollout (--mirror: twice, split alike)
    split = f"--num-minibatches {args.num_minibatches} must divide the {team_sequences} team sequences per rollout"
    check(team_sequences % args.num_minibatches == 0, split + " (num_envs * 2 * num_steps / bptt_len)")
    args.num_iterations = max(1, args.total_timesteps // (world_size * args.num_envs * args.num_steps))
    if rank == 0:
        shown = {key: getattr(args, key) for key in world_defaults(args.env_id)}  # the flags marked (world)
        shown = {key: " ".join(v) or "(every reference)" if isinstance(v, tuple) else v for key, v in shown.items()}
        defaults = ", ".join(f"--{key.replace('_', '-')} {value}" for key, value in shown.items())  # tuples as flags
        off = "".join(f", --no-{key.replace('_', '-')} (not in {args.env_id})" for key in turned_off)
        off += f", --bot-opponents without {' '.join(dropped)} (not among the references)" if dropped else ""
        saved = f" (the saved run's, --eval-only {args.eval_only})" if args.eval_only else ""  # not --env-id's
        print(f"{args.env_id}{saved}: {defaults}, score weights {score_weights}{off}", flush=True)
    weights = np.array([score_weights[name] for name in envs.score_names], dtype=np.float32)
    return references, held_out, weights


def clip_per_parameter(agent, grad_sq, grad_steps, beta2):
    """OpenAI Five's gradient clipping: each entry to +-5 sqrt(v), v the running (bias-corrected) second
    moment of the unclipped gradients, `grad_sq`, kept with Adam's beta2; returns the steps taken."""
    grad_steps += 1
    for param, v in zip(agent.parameters(), grad_sq, strict=True):
        v.mul_(beta2).add_((1 - beta2) * param.grad**2)
        limit = 5 * torch.sqrt(v / (1 - beta2**grad_steps))
        param.grad.copy_(torch.maximum(torch.minimum(param.grad, limit), -limit))
    return grad_steps


def log_games(writer, finished, score_names, global_step):
    """The games that ended in a rollout (`finished`: lists of arrays of their opponent kinds, the learner's
    outcomes, lengths and team scores): each one's outcome and length, the learner's mean scores, its win
    rates by opponent."""
    if not finished["kind"]:
        return
    finished = {key: np.concatenate(value) for key, value in finished.items()}
    for outcome, length in zip(finished["outcome"], finished["length"], strict=True):
        writer.add_scalar("charts/episodic_return", outcome, global_step)  # outcome: 1 win, 0 draw, -1 loss
        writer.add_scalar("charts/episodic_length", length, global_step)
    for name, value in zip(score_names, finished["scores"].mean(0), strict=True):  # the learner's team
        writer.add_scalar(f"scores/{name}", value, global_step)
    for kind, tag in ((PAST, "league/winrate_vs_past"), (BOT, "league/winrate_vs_bots")):
        if (finished["kind"] == kind).any():
            writer.add_scalar(tag, (finished["outcome"][finished["kind"] == kind] > 0).mean(), global_step)


def start_logging(args: Args, run_name: str, torchrun: Torchrun, checkpoint: dict | None):
    """The run's name (a resumed run keeps its own; under torchrun every process takes rank 0's), wandb
    (--track) and TensorBoard: rank 0's in runs/{run_name}, the other ranks' games beside; a resumed run drops
    the events logged after its checkpoint, so that the curves go on from there. Returns (run name, writer)."""
    run_name = torchrun.all_gather(checkpoint["run_name"] if checkpoint else run_name)[0]  # rank 0's
    rank = torchrun.rank
    if args.track and rank == 0:
        import wandb

        wandb.init(
            project=args.wandb_project_name,
            entity=args.wandb_entity,
            sync_tensorboard=True,
            config=vars(args),
            name=run_name,
            save_code=True,
        )
    log_dir = f"runs/{run_name}" + (f"/rank{rank}" if rank else "")
    writer = SummaryWriter(log_dir, purge_step=checkpoint["global_step"] + 1 if checkpoint else None)
    writer.add_text(
        "hyperparameters",
        "|param|value|\n|-|-|\n" + "\n".join([f"|{key}|{value}|" for key, value in vars(args).items()]),
    )
    return run_name, writer


def reference_evaluator(args: Args, envs, references, checkpoint, rank: int) -> ReferenceEvaluator:
    """TrueSkill evaluation against fixed references (OpenAI Five, Appendix J): the references rated by games
    among themselves once per world and bot set (cached), or on resume the ratings the run started with; rank 0
    says them."""
    if checkpoint:
        ratings = {k: rating_from_dict(r) for k, r in checkpoint["evaluator"]["references"].items()}
    else:
        ratings = rate_bots(envs, args.env_id, references, args.reference_games)
    evaluator = ReferenceEvaluator(ratings)
    if rank == 0:
        print("reference ratings:", {k: round(float(v.mu), 2) for k, v in evaluator.references.items()})
    return evaluator


def evaluate_saved(agent, saved, args, evaluator, references, held_out, device, eval_rng, run_name):
    """--eval-only: the saved model against every reference and held-out bot (sampled actions, each side in
    half of the games), its table printed."""
    try:
        agent.load_state_dict(saved["model"])
    except RuntimeError as error:
        refuse("--eval-only", args.eval_only, error, f"a model of {args.env_id} (see --env-id)")
    video = f"videos/{run_name}/eval.gif" if args.capture_video else None
    names, N = [*references, *held_out], args.num_heroes
    results = play_references(agent, args.env_id, N, args.eval_games, evaluator, names, device, eval_rng, video)
    print_reference_table(results, evaluator, args.eval_games, trained_bots(saved["args"], references), held_out)


def learner_state(agent, optimizer, grad_sq, grad_steps, versions, evaluator, eval_rng, pool, past_agents) -> dict:
    """The learner's part of a checkpoint (rank 0's: only it evaluates): what resume_learner reads back."""
    return {
        "model": agent.state_dict(),
        "optimizer": optimizer.state_dict(),
        "grad_sq": grad_sq,
        "grad_steps": grad_steps,
        "versions": versions,
        "evaluator": evaluator.state_dict(),
        "eval_generator": eval_rng.bit_generator.state,
        "pool": pool.state_dict(),
        "past_agents": [past.state_dict() for past in past_agents],
    }


def resume_learner(checkpoint, rank, agent, optimizer, evaluator, eval_rng, pool, past_agents, rng) -> dict:
    """--resume (as nanoGPT's train.py): the learner's state, the same in every process, read back key by key from
    the checkpoint written at the end of the training loop, then this process's generators. Returns this process's
    part of the checkpoint (its reward statistics and, in a world that saves its state, its games in progress)."""
    agent.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    evaluator.load_state_dict(checkpoint["evaluator"])
    eval_rng.bit_generator.state = checkpoint["eval_generator"]
    pool.load_state_dict(checkpoint["pool"])
    for state in checkpoint["past_agents"]:
        past_agents.append(copy.deepcopy(agent).eval())
        past_agents[-1].load_state_dict(state)
    local = checkpoint["ranks"][rank]
    set_rng_states(local["rng"])
    rng.bit_generator.state = local["generator"]
    return local


if __name__ == "__main__":
    launch_time = time.time()
    # the run's settings, step by step: the flags over the world's; --resume's; --eval-only's; resolve_args
    args = tyro.cli(Args, default=world_args(sys.argv[1:]))  # the defaults: --env-id's world's settings
    checkpoint = load_saved(args.resume, "--resume", CHECKPOINT_KEYS) if args.resume else None
    if checkpoint:  # continue the run: its Args, run name and counters (other flags given: ignored, and said)
        named = {arg[2:].split("=")[0].replace("-", "_") for arg in sys.argv[1:] if arg.startswith("--")}
        given = {k: v for k, v in vars(args).items() if k != "resume" and {k, f"no_{k}"} & named}
        if ignored := [f"--{k.replace('_', '-')} {v}" for k, v in given.items() if v != checkpoint["args"].get(k)]:
            print(f"--resume: the run goes on with its own flags; ignored: {' '.join(ignored)}")
        args = Args(**{**checkpoint["args"], "resume": args.resume})
    saved = load_saved(args.eval_only, "--eval-only", ("model",)) if args.eval_only else None
    if saved:  # --eval-only: the saved run's network and world settings (world_defaults' keys, alike in all worlds)
        for key in ("env_id", "hidden_size", "square_head", *world_defaults(Args.env_id)):
            setattr(args, key, getattr(Args(**saved["args"]), key))
    torchrun = Torchrun(args, checkpoint)  # one process without torchrun
    rank, world_size = torchrun.rank, torchrun.size
    envs = make_world(args, checkpoint, rank)
    references, held_out, weights = resolve_args(args, envs, rank, world_size)  # checked; printed on line 1
    if args.random_openings:  # board games: training games open at random (evaluations start empty)
        envs.random_openings = True
    gamma = discount(envs.seconds_per_step, args.horizon_seconds)  # OpenAI Five, Appendix G: H = T / (1 - gamma)
    # dimension names, as in the worlds' docstrings: E games, S sides, N heroes a side, A actions, P = E*S*N
    E, S, N, A = envs.num_envs, envs.num_sides, envs.num_heroes, envs.num_actions
    P, obs_shape = E * S * N, envs.obs_shape
    is_win = np.array([name == "win" for name in envs.score_names])

    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_name, writer = start_logging(args, run_name, torchrun, checkpoint)

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    eval_rng = np.random.default_rng([args.seed, 1])  # evaluation's own generator: evaluating never changes training

    device = torch.device(f"cuda:{torchrun.local_rank}" if torch.cuda.is_available() and args.cuda else "cpu")
    agent = Agent(obs_shape, A, N, args.hidden_size, envs.move_squares if args.square_head else None).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    grad_sq, grad_steps = [torch.zeros_like(param) for param in agent.parameters()], 0  # the gradient's 2nd moment
    # staleness (Appendix M): rollouts act with the oldest of the last policy_lag + 1 versions (all, early on)
    versions = [copy.deepcopy(agent.state_dict())] if args.policy_lag else []
    lagged_agent = copy.deepcopy(agent) if args.policy_lag else agent  # the network the rollouts act with

    evaluator = reference_evaluator(args, envs, references, checkpoint, rank)  # TrueSkill (Appendix J)
    if saved:  # --eval-only: the model against every reference and held-out bot; then the run ends
        evaluate_saved(agent, saved, args, evaluator, references, held_out, device, eval_rng, run_name)
        writer.close()
        torchrun.close()  # (under torchrun: every process leaves the group, as at the end)
        sys.exit(0)

    # torchrun: every process built the same network; from here on each plays its own games, own generators
    random.seed(args.seed + rank)
    np.random.seed(args.seed + rank)
    torch.manual_seed(args.seed + rank)
    rng = np.random.default_rng(args.seed + rank)

    # the past-opponent pool (Appendix N): weights here, quality scores in the pool
    pool = OpponentPool(eta=args.quality_lr)
    past_agents: list[Agent] = []
    bot_games = args.bot_fraction > 0 or args.bot_fraction_end > 0  # (none: Matchmaking draws no bot lots)
    matchmaking = Matchmaking(E, S, N, args.bot_opponents or references, args.past_fraction, bot_games)

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, P) + obs_shape).to(device)
    masks = torch.zeros((args.num_steps, P, A), dtype=torch.bool).to(device)
    actions = torch.zeros((args.num_steps, P), dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, P)).to(device)
    rewards = torch.zeros((args.num_steps, P)).to(device)
    dones = torch.zeros((args.num_steps, P)).to(device)
    values = torch.zeros((args.num_steps, P)).to(device)
    # the masks, a row a hero: `applied`, the hero's own action moves the game (a board's mover);
    # `learner_acts`, the latest policy drives the hero and its team acts (the network ran for it). After the
    # rollout, `in_update` is learner_acts less the heroes' last decisions `left_out` (below); the policy
    # learns from applied * in_update, the value from in_update
    applied = torch.zeros((args.num_steps, P)).to(device)
    learner_acts = torch.zeros((args.num_steps, P), dtype=torch.bool).to(device)
    num_chunks = args.num_steps // args.bptt_len
    chunk_h, chunk_c = (torch.zeros((num_chunks, P, agent.lstm.hidden_size)).to(device) for _ in range(2))
    # reward scaling: running variance of each hero's discounted return
    discounted_return = np.zeros((E, S, N))
    return_mean, return_var, return_count = torch.zeros(()), torch.ones(()), torch.tensor(1e-4)
    game_scores = np.zeros((E, S, len(envs.score_names)))  # each side's score components in the game so far

    # TRY NOT TO MODIFY: start the game
    global_step, start_iteration = 0, 0
    start_time = last_print = time.time()
    next_obs_np, info = envs.reset()
    next_done = torch.zeros(P).to(device)
    next_lstm_state = zero_state(agent, P, device)
    checkpoint_path, last_checkpoint = f"runs/{run_name}/checkpoint.pt", args.resume
    if checkpoint:  # resume (as nanoGPT's train.py): the checkpoint written at the end of the loop, read back
        start_iteration, global_step = checkpoint["iteration"], checkpoint["global_step"]
        grad_sq, grad_steps = [v.to(device) for v in checkpoint["grad_sq"]], checkpoint["grad_steps"]
        versions = [{k: v.to(device) for k, v in version.items()} for version in checkpoint["versions"]]
        local = resume_learner(checkpoint, rank, agent, optimizer, evaluator, eval_rng, pool, past_agents, rng)
        return_mean, return_var, return_count = local["return_moments"]
        if "world" in local:  # the lane world saves its state: the games in progress go on bit for bit
            envs.load_state_dict(local["world"])
            matchmaking.load_state_dict(local)
            next_obs_np, info, next_done = local["next_obs_np"], local["info"], local["next_done"].to(device)
            next_lstm_state = tuple(x.to(device) for x in local["next_lstm_state"])
            discounted_return, game_scores = local["discounted_return"], local["game_scores"]
        print(f"resumed from {args.resume} at update {start_iteration} (global_step {global_step})")
    next_obs = torch.as_tensor(next_obs_np.reshape((P,) + obs_shape), device=device)
    next_mask = torch.as_tensor(info["action_mask"].reshape(P, A), device=device)
    next_applied = torch.as_tensor(info["acting"].reshape(P), dtype=torch.float32, device=device)
    start_step = global_step

    for iteration in range(start_iteration + 1, args.num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / args.num_iterations  # 1 at the first update, 1 / num_iterations at the last
        lr = anneal(args.learning_rate, 0.0, frac) if args.anneal_lr else args.learning_rate
        optimizer.param_groups[0]["lr"] = lr
        ent_coef = anneal(args.ent_coef, args.ent_coef_final, frac)
        bot_share = anneal(args.bot_fraction, args.bot_fraction_end, frac)
        tau = anneal(args.team_spirit_start, args.team_spirit_end, frac)  # team spirit 0.3 -> 1 (Appendix G)
        finished = {"kind": [], "outcome": [], "length": [], "scores": []}  # games ended in this rollout
        past_games = []  # (past version, learner's score) of the games against past versions in this rollout
        if args.policy_lag:
            lagged_agent.load_state_dict(versions[0])

        for step in range(0, args.num_steps):
            if step % args.bptt_len == 0:  # truncated BPTT: remember the state each training sequence starts from
                chunk_h[step // args.bptt_len], chunk_c[step // args.bptt_len] = (s[0] for s in next_lstm_state)
            global_step += world_size * args.num_envs
            obs[step] = next_obs
            masks[step] = next_mask
            dones[step] = next_done
            applied[step] = next_applied
            team_acts = torch.as_tensor(team_acting(info, N), device=device)
            learner_driven = torch.as_tensor(matchmaking.learner_rows(), device=device)
            learner_acts[step] = team_acts & learner_driven

            # ALGO LOGIC: action logic
            with torch.inference_mode():
                prev_state = next_lstm_state
                action, logprob, _, value, next_lstm_state = lagged_agent.get_action_and_value(
                    next_obs, prev_state, next_done, learner_acts[step], next_mask
                )
                values[step] = value.flatten()
                # the opponents' rows (envs/matchmaking.py): past versions act with their own networks, then
                # bots; their actions replace the learner's (not learner_acts there: no weight in the update)
                rows, past_action, past_state = matchmaking.past_actions(
                    past_agents, next_obs, prev_state, next_done, team_acts, next_mask
                )
                action[rows] = past_action
                next_lstm_state[0][:, rows], next_lstm_state[1][:, rows] = past_state
                rows, bot_action = matchmaking.bot_actions(envs, next_obs_np, info, rng, device)
                action[rows] = bot_action
                next_lstm_state[0][:, rows], next_lstm_state[1][:, rows] = 0.0, 0.0  # a bot has no LSTM state
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs_np, scores, next_done_np, info = envs.step(action.cpu().numpy().reshape(E, S, N))
            reward = shape_rewards(scores, weights, is_win, info["time"], tau, args)
            game_scores += scores.sum(2)
            discounted_return = discounted_return * gamma + reward  # reward scaling (PPO detail)
            return_mean, return_var, return_count = update_moments(
                return_mean, return_var, return_count, torch.as_tensor(discounted_return.reshape(P))
            )
            discounted_return[next_done_np] = 0.0
            reward = reward / np.sqrt(return_var.item() + 1e-8)
            rewards[step] = torch.as_tensor(reward.reshape(P), dtype=torch.float32, device=device)
            next_obs = torch.as_tensor(next_obs_np.reshape((P,) + obs_shape), device=device)
            next_mask = torch.as_tensor(info["action_mask"].reshape(P, A), device=device)
            next_applied = torch.as_tensor(info["acting"].reshape(P), dtype=torch.float32, device=device)
            next_done = torch.as_tensor(np.repeat(next_done_np, S * N), dtype=torch.float32, device=device)

            over = np.flatnonzero(info["game_over"])  # the games that ended: log them, then draw their next opponents
            if over.size:
                side = matchmaking.learner_side[over]
                outcome = info["outcome"][over, side]
                finished["kind"].append(matchmaking.kind[over])
                finished["outcome"].append(outcome)
                finished["length"].append(info["game_length"][over])
                finished["scores"].append(game_scores[over, side])
                game_scores[over] = 0.0
                past = matchmaking.kind[over] == PAST  # the learner's score: 1 win, 0.5 draw, 0 loss
                past_games += zip(matchmaking.index[over][past], (outcome[past] + 1) / 2, strict=True)
                matchmaking.new_games(over, pool, bot_share, rng)

        past_games = [game for part in torchrun.all_gather(past_games) for game in part]  # every process's
        for k, score in past_games:
            pool.record_game(k, score)  # quality (Appendix N): q_i -= eta / (N p_i) on a win vs i

        log_games(writer, finished, envs.score_names, global_step)

        # bootstrap value if not done
        with torch.no_grad():
            all_rows = torch.ones(P, dtype=torch.bool, device=device)
            next_value = lagged_agent.get_value(next_obs, next_lstm_state, next_done, all_rows).reshape(1, -1)
            # semi-MDP bootstrap: a decision's advantage needs V at the hero's next decision. A hero that
            # decided at the last step and waits now (the other side moves next) has none in this rollout, so
            # that last decision is `left_out` (dropped), and its decisions before it bootstrap from V at that
            # last step (a move that ended a board game there is dropped too: nobody acts on a final board).
            # `in_update`: the learner's decisions this update learns from
            waits_at_end = ~torch.as_tensor(team_acting(info, N), device=device)
            left_out = learner_acts[-1] & waits_at_end
            in_update = torch.cat([learner_acts[:-1], (learner_acts[-1] & ~left_out)[None]])
            advantages, filled_values = gae(  # filled_values: those of the steps without a decision filled in
                rewards, values, dones, learner_acts, next_value, next_done, left_out, gamma, args.gae_lambda
            )
            returns = advantages + filled_values

        # flatten the batch (with --mirror, the rows' mirror images after them): the policy learns from its
        # own applied actions only, the value from every decision in the update; the network runs where it ran
        rollout = dict(obs=obs, masks=masks, actions=actions, logprobs=logprobs, dones=dones)
        rollout |= dict(learner_acts=learner_acts, advantages=advantages, returns=returns, values=filled_values)
        rollout |= dict(h=chunk_h, c=chunk_c, policy_weights=applied * in_update, value_weights=in_update.float())
        b = flatten_batch(rollout, envs.mirror if args.mirror else None)
        # truncated BPTT, CleanRL's flatinds with sequences for envs: flatinds[t, q] is the row of step t of
        # sequence q = (copy * num_chunks + chunk) * P + p (b["h"]'s order); team j's are j * N + n, n < N
        flatinds = np.arange(len(b["actions"])).reshape(-1, args.bptt_len, P)  # [copy and chunk][t][p]
        flatinds = flatinds.transpose(1, 0, 2).reshape(args.bptt_len, -1)  # [t][sequence]

        # Optimizing the policy and value network: minibatches of whole teams' sequences (the max-pool sees a team)
        num_teams = len(b["h"]) // N  # team sequences in the update
        team_inds = np.arange(num_teams)
        clipfracs = []
        finite = torch.tensor(True, device=device)  # numerical faults, checked once after the update
        for _epoch in range(args.update_epochs):
            np.random.shuffle(team_inds)
            for mb_teams in np.split(team_inds, args.num_minibatches):
                mb_seqs = (mb_teams[:, None] * N + np.arange(N)).reshape(-1)  # the team's heroes' sequences
                mb_inds = flatinds[:, mb_seqs].ravel()  # time-major, as get_states reads them
                _, newlogprob, entropy, newvalue, _ = agent.get_action_and_value(
                    b["obs"][mb_inds],
                    (b["h"][mb_seqs].unsqueeze(0), b["c"][mb_seqs].unsqueeze(0)),
                    b["dones"][mb_inds],
                    b["learner_acts"][mb_inds],
                    b["masks"][mb_inds],
                    b["actions"][mb_inds],
                )
                pg_w, v_w = b["policy_weights"][mb_inds], b["value_weights"][mb_inds]
                pg_n, v_n = pg_w.sum().clamp(min=1), v_w.sum().clamp(min=1)
                logratio = newlogprob - b["logprobs"][mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = ((-logratio) * pg_w).sum() / pg_n
                    approx_kl = (((ratio - 1) - logratio) * pg_w).sum() / pg_n
                    clipfracs += [((((ratio - 1.0).abs() > args.clip_coef).float() * pg_w).sum() / pg_n).item()]

                mb_advantages = b["advantages"][mb_inds]
                if args.norm_adv:  # statistics over the applied learner actions only
                    mean = (mb_advantages * pg_w).sum() / pg_n
                    std = ((((mb_advantages - mean) ** 2) * pg_w).sum() / pg_n).sqrt()
                    mb_advantages = (mb_advantages - mean) / (std + 1e-8)

                pg_loss = (policy_loss(mb_advantages, ratio, args.clip_coef) * pg_w).sum() / pg_n
                newvalue = newvalue.view(-1)
                mb_values, mb_returns = b["values"][mb_inds], b["returns"][mb_inds]
                v_loss = value_loss(newvalue, mb_values, mb_returns, args.clip_coef, args.clip_vloss)
                v_loss = (v_loss * v_w).sum() / v_n

                entropy_loss = (entropy * pg_w).sum() / pg_n
                loss = pg_loss - ent_coef * entropy_loss + v_loss * args.vf_coef
                finite &= loss.isfinite()

                optimizer.zero_grad()
                loss.backward()
                for param in agent.parameters():  # a minibatch with no active row reaches no encoder: zero, not None
                    if param.grad is None:
                        param.grad = torch.zeros_like(param)
                torchrun.average_gradients(agent.parameters())
                if args.clip_grad_per_param:  # OpenAI Five: each entry to +-5 sqrt(v), v of the unclipped gradients
                    grad_steps = clip_per_parameter(agent, grad_sq, grad_steps, optimizer.defaults["betas"][1])
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

            if args.target_kl is not None:  # the processes' mean: every process stops after the same epoch
                approx_kl = torchrun.all_reduce(approx_kl) / world_size
                if approx_kl > args.target_kl:
                    break

        # observation normalisation (OpenAI Five) from the rows the network saw, every process's (in rank order);
        # after the update, so that the next update's ratio starts at 1 (without --policy-lag: its rollout acts
        # with these statistics)
        agent.update_obs_stats(torchrun.cat(obs[learner_acts]))
        torchrun.broadcast(agent.buffers())  # rank 0's bits in every process, should any rounding differ
        if args.policy_lag:  # the last policy_lag + 1 versions: the oldest acts next
            versions = versions[-args.policy_lag :] + [copy.deepcopy(agent.state_dict())]

        # numerical faults: the losses, the parameters and the next rollout's first outputs must be finite
        with torch.no_grad():
            hidden, _, squares = agent.get_states(next_obs, next_lstm_state, next_done, all_rows)
            finite &= torch.stack([param.isfinite().all() for param in agent.parameters()]).all()
            finite &= agent.get_logits(hidden, squares).isfinite().all() & agent.critic(hidden).isfinite().all()
        if not torchrun.all_reduce(finite.float(), "MIN"):  # a fault in any process stops them all
            fault_stop(iteration, last_checkpoint)

        y_pred, y_true = filled_values[in_update], returns[in_update]
        var_y = y_true.var()
        explained_var = np.nan if var_y == 0 else (1 - (y_true - y_pred).var() / var_y).item()

        # self-play: the current policy joins the past-opponent pool every K updates with quality max(q)
        if iteration % args.pool_every == 0:
            past_agents.append(copy.deepcopy(agent).eval())
            pool.add(f"v{iteration}")
            probs = pool.probabilities()
            writer.add_scalar("league/pool_size", len(pool.keys), global_step)
            logs = np.log(probs, out=np.zeros_like(probs), where=probs > 0)  # 0 log 0 = 0
            writer.add_scalar("league/opponent_entropy", float(-(probs * logs).sum()), global_step)
            writer.add_histogram("league/opponent_probabilities", probs, global_step)

        # TrueSkill evaluation against the fixed references
        if rank == 0 and (iteration % args.eval_every == 0 or iteration == args.num_iterations):
            video_path = f"videos/{run_name}/update_{iteration}.gif" if args.capture_video else None
            last = iteration == args.num_iterations  # the last plays every reference and held-out bot: the summary
            names = [*references, *held_out] if last else evaluator.choose()
            results = play_references(
                agent, args.env_id, N, args.eval_games, evaluator, names, device, eval_rng, video_path
            )
            if last:  # the final model against every reference and held-out bot, and its robust rung
                trained = trained_bots(vars(args), references)
                print_reference_table(results, evaluator, args.eval_games, trained, held_out)
            rating = evaluator.finish_version(iteration)  # the next version starts from this mu, sigma reset
            writer.add_scalar("charts/trueskill_mu", rating.mu, global_step)
            writer.add_scalar("charts/trueskill_sigma", rating.sigma, global_step)
            for name, (win, _, _) in results.items():
                writer.add_scalar(f"eval/winrate_{name}", win, global_step)
            wins = " ".join(f"win_vs_{k}={v[0]:.2f}" for k, v in results.items())
            rated = f"trueskill_mu={rating.mu:.2f} sigma={rating.sigma:.2f} {wins}"
            print(f"eval time={time.time() - launch_time:.1f}s global_step={global_step} {rated}", flush=True)

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
        if rank == 0 and (time.time() - last_print > 10 or iteration in (start_iteration + 1, args.num_iterations)):
            last_print = time.time()
            eta = (args.num_iterations - iteration) * (last_print - start_time) / (iteration - start_iteration)
            print(f"iteration {iteration}/{args.num_iterations} global_step={global_step} SPS={sps} ETA={eta:.0f}s")

        # checkpoint (as nanoGPT's train.py; --resume reads it back above): all the next update depends on
        if args.save_every and (iteration % args.save_every == 0 or iteration == args.num_iterations):
            writer.flush()  # everything logged up to this update is on disk with the checkpoint
            local = {
                "rng": rng_states(),
                "generator": rng.bit_generator.state,
                "return_moments": (return_mean, return_var, return_count),
            }
            if hasattr(envs, "state_dict"):  # the lane world saves its state: its games go on bit for bit
                local.update(
                    world=envs.state_dict(),
                    **matchmaking.state_dict(),
                    next_obs_np=next_obs_np,
                    info=info,
                    next_done=next_done.cpu(),  # (CPU tensors: rank 0 unpickles no other rank's GPU memory)
                    next_lstm_state=tuple(s.cpu() for s in next_lstm_state),
                    discounted_return=discounted_return,
                    game_scores=game_scores,
                )
            ranks = torchrun.all_gather(local)  # each process's under "ranks"
            learner = learner_state(
                agent, optimizer, grad_sq, grad_steps, versions, evaluator, eval_rng, pool, past_agents
            )
            run = {"args": vars(args), "run_name": run_name, "iteration": iteration, "global_step": global_step}
            if rank == 0:
                atomic_save({**run, **learner, "ranks": ranks}, checkpoint_path)
            last_checkpoint = checkpoint_path

    if args.save_model and rank == 0:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanfive_model"
        atomic_save({"args": vars(args), "model": agent.state_dict()}, model_path)
        print(f"model saved to {model_path}")

    writer.close()
    torchrun.close()
    if rank == 0:
        print(f"params_sha256={params_sha256(agent)}")
