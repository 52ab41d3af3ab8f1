# docs and experiment results: docs/ppo_action_guidance.md (mkdocs site: `uv run --all-extras mkdocs serve`)
import hashlib
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import tyro
from torch.utils.tensorboard import SummaryWriter

from cleanfive.envs.microrts import (
    ACTION_DIMS,
    BOT_NAMES,
    MASK_SIZE,
    NUM_PLANES,
    REWARD_NAMES,
    MicrortsGridEnv,
    MicrortsUnavailable,
    play_bot_games,
)
from cleanfive.trueskill_league import fit_reference_ratings


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]  # the name of this experiment
    seed: int = 1  # seed of the experiment
    torch_deterministic: bool = True  # if toggled, `torch.backends.cudnn.deterministic=True`
    cuda: bool = True  # if toggled, cuda will be enabled when available
    # PyTorch CPU threads (1 leaves the other cores to the Java game engine; 0: PyTorch's default)
    torch_threads: int = 1
    track: bool = False  # if toggled, this experiment will be tracked with Weights and Biases
    wandb_project_name: str = "cleanfive"  # the wandb's project name
    wandb_entity: str | None = None  # the entity (team) of wandb's project
    # save GIFs of env 0's episodes 0, 1, 8, 27, ... and its first evaluation episode (needs a display for µRTS)
    capture_video: bool = False
    save_model: bool = False  # whether to save the final model (with its `Args`) into `runs/{run_name}`
    save_every: int = 20  # write `runs/{run_name}/checkpoint.pt` (atomically) every this many updates (0: never)
    # continue from a `checkpoint.pt` with its `Args` (the games in progress restart: they live in the JVM)
    resume: str | None = None

    # Gym-µRTS task (defaults: the thesis' setting, scaled down to a 2-core laptop; see the docs page)
    map_path: str = "maps/10x10/basesWorkers10x10.xml"  # map in the gym-microrts folder (even sides: they halve)
    # the sparse-reward task: its opponent, game length, sparse reward R_M and shaped reward R_A1 (see TASKS)
    task: Literal["LearnToAttack", "ProduceCombatUnits", "DefeatRandomEnemy"] = "LearnToAttack"
    num_envs: int = 8  # the number of games against the task's bot (the agent is player 0, top left)
    # game length limit in frames (default: the task's; the thesis' 200, 400, 600 decisions x 10 frames)
    max_steps: int | None = None

    # Algorithm specific arguments
    total_timesteps: int = 300_000  # total environment steps (frames x envs)
    learning_rate: float = 2.5e-4  # the learning rate of the optimizer
    num_steps: int = 128  # the number of steps per env in each rollout
    anneal_lr: bool = True  # toggle learning rate annealing
    gamma: float = 0.99  # the discount factor gamma
    gae_lambda: float = 0.95  # the lambda for the general advantage estimation
    num_minibatches: int = 4  # the number of mini-batches
    update_epochs: int = 4  # the K epochs to update the policy
    norm_adv: bool = True  # toggles advantages normalization
    clip_coef: float = 0.1  # the surrogate clipping coefficient
    clip_vloss: bool = True  # toggles whether or not to use a clipped loss for the value function
    ent_coef: float = 0.01  # coefficient of the entropy
    vf_coef: float = 0.5  # coefficient of the value function
    max_grad_norm: float = 0.5  # the maximum norm for the gradient clipping
    target_kl: float | None = None  # the target KL divergence threshold

    # Action guidance (thesis section 8.3)
    plo: bool = False  # positive learning optimization: skip a policy's update when its rollout holds no reward for it
    # Table 8.1: PPO on R_M alone, on R_A1 alone, or action guidance with the long, short or mixed-policy schedule
    strategy: Literal["sparse", "shaped", "long-adaptation", "short-adaptation", "mixed-policy"] = "short-adaptation"
    # probability that the auxiliary policy acts during the shift period (default: the strategy's)
    epsilon_start: float | None = None
    shift: float | None = None  # shift period, as a fraction of --total-timesteps (default: the strategy's)
    # adaptation period (epsilon decays linearly to --epsilon-end), a fraction of --total-timesteps
    adaptation: float | None = None
    # probability that the auxiliary policy acts after the adaptation period (default: the strategy's)
    epsilon_end: float | None = None

    # Evaluation
    eval_episodes: int = 8  # final evaluation games, acting as at the end (rounded up to a multiple of --num-envs)
    # bots of the final TrueSkill league (rated with the agent; randomAI, if present, anchors mu = 0)
    eval_bots: tuple[str, ...] = ("coacAI", "workerRushAI", "lightRushAI", "rojo", "randomBiasedAI", "randomAI")
    eval_games: int = 0  # games of the agent against each of `--eval-bots` (0: no league)
    league_games: int = 2  # games per pair of `--eval-bots` (seats alternate) to rate the bots in the same league
    # path of a saved `.cleanfive_model` (or a `checkpoint.pt`): skip training, only evaluate it, and exit
    eval_only: str | None = None

    # to be filled in runtime
    batch_size: int = 0  # the batch size (computed in runtime)
    minibatch_size: int = 0  # the mini-batch size (computed in runtime)
    num_iterations: int = 0  # the number of iterations (computed in runtime)


MASK_VALUE = -1e8  # logit of an illegal entry (Eq. 7.2)
OFFSETS = torch.tensor(np.cumsum((0,) + ACTION_DIMS[:-1]))  # first mask entry of each action component
# action component(s) each action type reads: NOOP none, move, harvest, return, produce direction + type, attack
USES = torch.tensor([[c in reads for c in range(7)] for reads in [(0,), (0, 1), (0, 2), (0, 3), (0, 4, 5), (0, 6)]])
STAT_NAMES = ("a_null", "a_busy", "a_owner", "invalid")  # per-episode counts of action_stats
CHECKPOINT_KEYS = ("run_name", "iteration", "global_step", "model", "optimizer", "rng", "history", "plo_skips")
# Section 8.4.1: bot, frames per game, weights of R_M and R_A1 over REWARD_NAMES + "closer" (see base_distance)
TASKS = {
    "LearnToAttack": ("passiveAI", 2000, (0, 0, 0, 0, 1, 0, 0), (0, 0, 0, 0, 1, 0, 1)),
    "ProduceCombatUnits": ("passiveAI", 4000, (0, 0, 0, 0, 0, 1, 0), (0, 1, 0, 1, 0, 7, 0)),
    "DefeatRandomEnemy": ("randomBiasedAI", 6000, (1, 0, 0, 0, 0, 0, 0), (5, 1, 1, 0.2, 1, 7, 0.2)),
}
# Section 8.4.2: each strategy's schedule (fractions of the thesis' 10M steps); sparse, shaped: PPO on one policy
SCHEDULE_KEYS = ("epsilon_start", "shift", "adaptation", "epsilon_end")
STRATEGIES = {
    "sparse": (0.0, 0.0, 0.0, 0.0),
    "shaped": (1.0, 0.0, 0.0, 1.0),
    "long-adaptation": (0.95, 0.2, 0.7, 0.0),
    "short-adaptation": (0.95, 0.08, 0.1, 0.0),
    "mixed-policy": (0.95, 0.2, 0.2, 0.5),
}
MAIN, AUX = 0, 1  # the main policy learns from R_M only, the auxiliary policy from R_A1
POLICY_NAMES = ("main", "aux")


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


def save_gif(frames: list, path: str) -> None:
    """Write RGB frames (H, W, 3) as an animated GIF of 320x320 pixels."""
    from PIL import Image

    os.makedirs(os.path.dirname(path), exist_ok=True)
    gif = [Image.fromarray(frame).resize((320, 320)) for frame in frames]
    gif[0].save(path, save_all=True, append_images=gif[1:])


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


def gridnet_distribution(logits, mask, sample_masked, score_masked, action=None):
    """MultiDiscrete over ACTION_DIMS of N cells that issue an action; logits and mask (N, 78), action (N, 7).
    Samples from the masked logits (illegal entries set to MASK_VALUE) if `sample_masked`, else from the raw logits.
    Log-prob and entropy come from the masked logits if `score_masked` (invalid action masking: renormalised over
    legal entries, illegal entries carry no entropy and no gradient) or from the raw logits (naive masking, penalty).
    Returns action, and log-prob and entropy summed over components, per cell: (N, 7), (N,), (N,)."""
    masked = logits.masked_fill(~mask, MASK_VALUE)
    if action is None:  # Gumbel-max: one categorical sample per component and cell
        noisy = (masked if sample_masked else logits) - torch.log(-torch.log(torch.rand_like(logits)))
        action = torch.stack([c.argmax(-1) for c in noisy.split(ACTION_DIMS, -1)], -1)
    logprob, entropy, score = 0.0, 0.0, masked if score_masked else logits
    for i, (lg, m) in enumerate(zip(score.split(ACTION_DIMS, -1), mask.split(ACTION_DIMS, -1), strict=True)):
        logp = torch.log_softmax(lg, -1)
        logprob = logprob + logp.gather(-1, action[:, i : i + 1]).squeeze(-1)
        p_logp = logp.exp() * logp
        entropy = entropy - (p_logp.where(m, 0.0) if score_masked else p_logp).sum(-1)
    return action, logprob, entropy


def transposed_conv_at(up, h, b, y, x):
    """`up` (ConvTranspose2d: kernel 3, stride 2, padding 1, output padding 1) on h (B, C, H, W) at the output cells
    (b, y, x) only: (N, out). A transposed convolution is a convolution, kernel flipped, of its input spread out with
    zeros between the cells; each output cell reads a 3x3 patch of that, times the kernel as (out, 3 * 3 * C)."""
    B, C, H, W = h.shape
    spread = h.new_zeros(B, 2 * H + 2, 2 * W + 2, C)  # input cell (i, j) at (2i + 1, 2j + 1), channels last
    spread[:, 1:-1:2, 1:-1:2] = h.permute(0, 2, 3, 1)
    k = torch.arange(3, device=h.device)
    patches = spread[b[:, None, None], y[:, None, None] + k[:, None], x[:, None, None] + k]  # (N, 3, 3, C)
    return nn.functional.linear(patches.flatten(1), up.weight.flip(2, 3).permute(1, 2, 3, 0).flatten(1), up.bias)


def action_stats(obs, mask, action):
    """Gridnet analogues of Table 7.2's a_null, a_busy, a_owner, and the invalid-action count, per env: (E, 4).
    Over cells whose sampled action type is not NOOP: a_null = the cell holds no unit, a_busy = an own unit that is
    busy, a_owner = a unit the player does not own (enemy or resource). invalid = own available units whose action
    type, or a parameter that type reads, is illegal. obs (E, H, W, 27), mask (E, HW, 78), action (E, HW, 7)."""
    cells = obs.reshape(mask.shape[0], mask.shape[1], NUM_PLANES)
    issued, no_unit = action[..., 0] > 0, cells[..., 13] == 1  # unit-type plane "none"
    own = (cells[..., 11] == 1) & (cells[..., 14] == 0)  # owner plane "self", and not a resource
    available = mask[..., : ACTION_DIMS[0]].any(-1)
    legal = mask.gather(-1, action + OFFSETS.to(action.device))
    invalid = available & (USES.to(action.device)[action[..., 0]] & ~legal).any(-1)
    counts = [issued & no_unit, issued & own & ~available, issued & ~no_unit & ~own, invalid]
    return torch.stack(counts, -1).sum(1).float()


def epsilon_at(step, total, start, shift, adaptation, end):
    """Probability that the auxiliary policy acts at env step `step` (Section 8.3.1): `start` during the shift period
    (the first `shift * total` steps), then linear to `end` over the next `adaptation * total` steps, then `end`."""
    shift_end, adaptation_end = shift * total, (shift + adaptation) * total
    if step < shift_end:
        return start
    if step >= adaptation_end:
        return end
    return start + (end - start) * (step - shift_end) / (adaptation_end - shift_end)


def base_distance(obs):
    """Per env, the Euclidean distance between the enemy base and the own worker or combat unit nearest to it; inf
    where either is missing (µRTS' CloserToEnemyBaseRewardFunction, which gym-microrts 0.6.0 no longer reports).
    obs (E, H, W, 27) -> (E,)."""
    E, H, W, _ = obs.shape
    yx = torch.stack(torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij"), -1).reshape(-1, 1, 2)
    pair = ((yx - yx.transpose(0, 1)) ** 2).sum(-1).float().sqrt().to(obs.device)  # (HW, HW) cell distances
    cells = obs.reshape(E, H * W, NUM_PLANES)
    own = (cells[..., 11] == 1) & (cells[..., 17:21] == 1).any(-1)  # owner "self"; worker, light, heavy, ranged
    base = (cells[..., 12] == 1) & (cells[..., 15] == 1)  # owner "enemy"; base
    return pair.where(own[:, :, None] & base[:, None, :], torch.inf).flatten(1).amin(1)


def task_rewards(raw, distance, next_distance, done, weights):
    """R_M and R_A1 of one step, (2, E): `weights` (2, 7) times the six raw rewards (E, 6) and "closer", the drop in
    base_distance over the step (0 when the game ended, as the next observation is the new game's, or where inf)."""
    valid = torch.isfinite(distance) & torch.isfinite(next_distance) & ~done
    closer = torch.where(valid, distance - next_distance, 0.0)
    return weights @ torch.cat([raw, closer[:, None]], 1).T


def num_stages(height, width):
    """Down/up-sampling stages of the encoder-decoder: how often the map halves exactly, at most 4."""
    stages = 0
    while stages < 4 and height % 2 == 0 and width % 2 == 0:
        height, width, stages = height // 2, width // 2, stages + 1
    return stages


class Agent(nn.Module):
    def __init__(self, height: int, width: int):
        super().__init__()
        stages = num_stages(height, width)
        channels = [NUM_PLANES] + [32 * 2**i for i in range(stages)]
        encoder, decoder = [], []
        for i in range(stages):  # encoder: conv + stride-2 max-pool; decoder: stride-2 transposed conv
            encoder += [layer_init(nn.Conv2d(channels[i], channels[i + 1], 3, padding=1))]
            encoder += [nn.MaxPool2d(3, stride=2, padding=1), nn.ReLU()]
            out, std = (channels[i], np.sqrt(2)) if i else (MASK_SIZE, 0.01)  # last layer: the 78 logits per cell
            up = layer_init(nn.ConvTranspose2d(channels[i + 1], out, 3, stride=2, padding=1, output_padding=1), std)
            decoder = [up, nn.ReLU()] + decoder
        self.encoder, self.actor = nn.Sequential(*encoder), nn.Sequential(*decoder[:-1])
        flat = channels[-1] * (height >> stages) * (width >> stages)  # the encoder's output size
        critic = [nn.Flatten(), layer_init(nn.Linear(flat, 128)), nn.ReLU(), layer_init(nn.Linear(128, 1), std=1)]
        self.critic = nn.Sequential(*critic)

    def get_value(self, x):
        return self.critic(self.encoder(x.permute(0, 3, 1, 2)))

    def get_action_and_value(self, x, mask, sample_masked, score_masked, action=None):
        """Action (B, HW, 7), log-prob and entropy summed over the cells that issue an action (B,), value (B, 1).
        When sampling masked, cells without an available own unit issue NOOP, are left out of log-prob and entropy,
        and get no logits: the decoder's last layer runs only at the cells that act (a few per map)."""
        hidden = self.encoder(x.permute(0, 3, 1, 2))  # (B, H, W, 27) -> (B, 27, H, W)
        b, c = (mask.any(-1) if sample_masked else torch.ones_like(mask[..., 0])).nonzero(as_tuple=True)
        if sample_masked:  # the decoder's last layer only at the N acting cells (row b, cell c = y * W + x): (N, 78)
            logits = transposed_conv_at(self.actor[-1], self.actor[:-1](hidden), b, c // x.shape[2], c % x.shape[2])
        else:  # every cell acts: the whole decoder, (B * HW, 78)
            logits = self.actor(hidden).permute(0, 2, 3, 1).flatten(0, 2)
        acted = None if action is None else action[b, c]
        acted, logprob, entropy = gridnet_distribution(logits, mask[b, c], sample_masked, score_masked, acted)
        if action is None:
            action = torch.zeros_like(mask[..., : len(ACTION_DIMS)], dtype=torch.long).index_put((b, c), acted)
        zeros = logits.new_zeros(x.shape[0])
        return action, zeros.index_add(0, b, logprob), zeros.index_add(0, b, entropy), self.critic(hidden)


def gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """Generalized advantage estimation (Schulman et al. 2016, eq. 16) over (T, E) tensors, as CleanRL writes it;
    ``dones[t]`` marks that the observation of step t starts a new game, ``next_done`` the one after the last step."""
    advantages, lastgaelam, num_steps = torch.zeros_like(rewards), 0, len(rewards)
    for t in reversed(range(num_steps)):
        nextnonterminal = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
        nextvalues = next_value if t == num_steps - 1 else values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    return advantages


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


def ppo_update(args, agent, optimizer, rollout, next_obs, next_done, sample_masked, score_masked):
    """GAE, then CleanRL's PPO epochs over shuffled minibatches. rollout: obs (T, E, H, W, 27), masks (T, E, HW, 78),
    actions (T, E, HW, 7), logprobs, rewards, dones, values (T, E) with T = num_steps; next_obs (E, H, W, 27) and
    next_done (E,) follow the last step. Returns the losses to log and whether every minibatch's loss was finite."""
    rewards, dones, values = rollout["rewards"], rollout["dones"], rollout["values"]
    with torch.no_grad():
        next_value = agent.get_value(next_obs).reshape(1, -1)  # bootstrap value if not done
        advantages = gae(rewards, values, dones, next_value, next_done, args.gamma, args.gae_lambda)
        returns = advantages + values

    # flatten the batch: (T, E, ...) -> (T * E, ...)
    b = {key: rollout[key].flatten(0, 1) for key in ("obs", "masks", "actions", "logprobs", "values")}
    b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)

    b_inds, clipfracs = np.arange(args.batch_size), []  # Optimizing the policy and value network
    finite = torch.ones((), dtype=torch.bool, device=next_obs.device)  # every minibatch's loss was finite
    for _epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, args.batch_size, args.minibatch_size):
            mb_inds = b_inds[start : start + args.minibatch_size]
            _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                b["obs"][mb_inds], b["masks"][mb_inds], sample_masked, score_masked, b["actions"][mb_inds]
            )
            logratio = newlogprob - b["logprobs"][mb_inds]
            ratio = logratio.exp()

            with torch.no_grad():
                old_approx_kl = (-logratio).mean()  # calculate approx_kl http://joschu.net/blog/kl-approx.html
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

            mb_advantages = b_advantages[mb_inds]
            if args.norm_adv:
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

            # Policy loss
            pg_loss = policy_loss(mb_advantages, ratio, args.clip_coef).mean()

            # Value loss
            newvalue = newvalue.view(-1)
            v_loss = value_loss(newvalue, b["values"][mb_inds], b_returns[mb_inds], args.clip_coef, args.clip_vloss)
            v_loss = v_loss.mean()

            entropy_loss = entropy.mean()
            loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()
            finite &= loss.isfinite()

        if args.target_kl is not None and approx_kl > args.target_kl:
            break

    y_pred, y_true = b["values"].cpu().numpy(), b_returns.cpu().numpy()
    var_y = np.var(y_true)
    explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
    losses = {"value_loss": v_loss.item(), "policy_loss": pg_loss.item(), "entropy": entropy_loss.item()}
    losses |= {"old_approx_kl": old_approx_kl.item(), "approx_kl": approx_kl.item(), "clipfrac": np.mean(clipfracs)}
    return losses | {"explained_variance": explained_var}, finite


def guided_action(agents, policies, obs, mask, epsilon):
    """ε-greedy behaviour policy (Section 8.3.1): in each env the auxiliary policy acts with probability ε, else the
    main one (both with invalid action masking). Runs the networks of `policies` only. Returns the action (E, HW, 7),
    the log-prob of the policy that acted (E,) and the values (2, E) (0 for a policy not in `policies`)."""
    E = obs.shape[0]
    aux = torch.rand(E, device=obs.device) < epsilon
    action = torch.zeros(mask.shape[:2] + (len(ACTION_DIMS),), dtype=torch.long, device=obs.device)
    logprob, values = torch.zeros(E, device=obs.device), torch.zeros(2, E, device=obs.device)
    for p in policies:
        sampled, sampled_logprob, _, value = agents[p].get_action_and_value(obs, mask, True, True)
        acting = aux if p == AUX else ~aux
        action[acting], logprob[acting], values[p] = sampled[acting], sampled_logprob[acting], value.flatten()
    return action, logprob, values


def evaluate(agent, policies, envs, weights, device, epsilon, episodes, video_path=None):
    """Mean sparse and shaped return of the first ceil(`episodes` / E) games of every env, acting with ε = `epsilon`.
    With `video_path`, every 10th frame of env 0's first episode is saved there as a GIF."""
    next_obs, info = envs.reset()
    returns, finished, frames, step = torch.zeros(2, envs.num_envs, device=device), [], [], 0
    games, played = -(-episodes // envs.num_envs), np.zeros(envs.num_envs, dtype=int)
    while (played < games).any():
        obs = torch.as_tensor(next_obs, dtype=torch.float32, device=device)
        mask = torch.as_tensor(info["action_mask"], device=device)
        with torch.no_grad():
            action, _, _ = guided_action(agent, policies, obs, mask, epsilon)
        if video_path and step % 10 == 0:
            frames.append(envs.render())
        next_obs, _, terminated, truncated, info = envs.step(action.cpu().numpy())
        step += 1
        done = torch.as_tensor(terminated | truncated, device=device)
        raw = torch.as_tensor(info["raw_rewards"], dtype=torch.float32, device=device)
        next_distance = base_distance(torch.as_tensor(next_obs, dtype=torch.float32, device=device))
        returns += task_rewards(raw, base_distance(obs), next_distance, done, weights)
        for i in np.flatnonzero(info.get("_episode", [])):
            if played[i] < games:
                finished.append(returns[:, i].tolist())
            played[i], returns[:, i] = played[i] + 1, 0
            if i == 0 and video_path:
                save_gif(frames, video_path)
                video_path = None
    return np.mean(finished, axis=0)


def play_league(agent, args, device):
    """Agent vs each of `--eval-bots` and the bots among themselves; one TrueSkill league (Appendix J settings)."""
    bots = [b for b in args.eval_bots for _ in range(args.eval_games)]
    envs = MicrortsGridEnv(args.map_path, 0, bots, args.max_steps, (1.0, 0, 0, 0, 0, 0))  # reads the raw win/loss
    next_obs, info = envs.reset()
    scores = np.full(len(bots), np.nan)  # the agent (player 0) scores 1 win, 0.5 draw, 0 loss
    while np.isnan(scores).any():
        obs = torch.as_tensor(next_obs, dtype=torch.float32, device=device)
        with torch.no_grad():
            mask = torch.as_tensor(info["action_mask"], device=device)
            action, _, _ = guided_action(agent, (MAIN, AUX), obs, mask, args.epsilon_end)  # ε picks who acts
        next_obs, _, _, _, info = envs.step(action.cpu().numpy())
        if "_episode" in info:
            over = info["_episode"] & np.isnan(scores)
            scores[over] = (np.sign(info["episode"]["raw"][over, REWARD_NAMES.index("win_loss")]) + 1) / 2
    envs.close()
    pairs = [(a, b) for i, a in enumerate(args.eval_bots) for b in args.eval_bots[i + 1 :]]
    seated = [(a, b) if g % 2 == 0 else (b, a) for a, b in pairs for g in range(args.league_games)]
    bot_scores = play_bot_games(seated, args.map_path, args.max_steps) if seated else []
    results = [("agent", b, float(s)) for b, s in zip(bots, scores, strict=True)]
    results += [(a, b, float(s)) for (a, b), s in zip(seated, bot_scores, strict=True)]
    ratings = fit_reference_ratings(results, anchor="randomAI" if "randomAI" in args.eval_bots else args.eval_bots[0])
    wdl = {b: [np.sum(scores[np.array(bots) == b] == s) for s in (1.0, 0.5, 0.0)] for b in args.eval_bots}
    return wdl, ratings


if __name__ == "__main__":
    args = tyro.cli(Args)
    checkpoint = load_saved(args.resume, "--resume", CHECKPOINT_KEYS) if args.resume else None
    if checkpoint:  # continue the run: its Args, run name and counters (other flags given: ignored, and said)
        named = {arg[2:].split("=")[0].replace("-", "_") for arg in sys.argv[1:] if arg.startswith("--")}
        given = {k: v for k, v in vars(args).items() if k != "resume" and {k, f"no_{k}"} & named}
        if ignored := [f"--{k.replace('_', '-')} {v}" for k, v in given.items() if v != checkpoint["args"].get(k)]:
            print(f"--resume: the run goes on with its own flags; ignored: {' '.join(ignored)}")
        args = Args(**{**checkpoint["args"], "resume": args.resume})
    saved = load_saved(args.eval_only, "--eval-only", ("model",)) if args.eval_only else None
    for key in ("task", "map_path", "max_steps", "strategy", "epsilon_end") if saved else ():  # what it was trained for
        setattr(args, key, saved["args"][key])
    given = [key for key in SCHEDULE_KEYS if getattr(args, key) is not None]
    if args.strategy in ("sparse", "shaped") and given and not (checkpoint or saved):
        usage_error(f"--{given[0].replace('_', '-')} only applies to the action-guidance strategies")
    for key, value in zip(SCHEDULE_KEYS, STRATEGIES[args.strategy], strict=True):  # the strategy's, where not given
        setattr(args, key, value if getattr(args, key) is None else getattr(args, key))
    bot, frames_per_game, sparse_weights, shaped_weights = TASKS[args.task]
    args.max_steps = args.max_steps or frames_per_game
    at_least_1 = ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "max_steps")
    at_least_0 = ("ent_coef", "shift", "adaptation", "eval_episodes", "eval_games", "league_games", "torch_threads")
    positive = ("learning_rate", "clip_coef", "vf_coef", "max_grad_norm")
    ranges = [(name, getattr(args, name) >= 1, ">= 1") for name in at_least_1]
    ranges += [(name, getattr(args, name) >= 0, ">= 0") for name in (*at_least_0, "save_every")]
    ranges += [(name, getattr(args, name) > 0, "> 0") for name in positive]
    ranges += [("gamma", 0 < args.gamma <= 1, "in (0, 1]"), ("gae_lambda", 0 <= args.gae_lambda <= 1, "in [0, 1]")]
    ranges += [("target_kl", args.target_kl is None or args.target_kl > 0, "> 0")]
    ranges += [(name, 0 <= getattr(args, name) <= 1, "in [0, 1]") for name in ("epsilon_start", "epsilon_end")]
    for name, ok, allowed in ranges:
        check(ok, f"--{name.replace('_', '-')} {getattr(args, name)} is out of range: it must be {allowed}")
    args.batch_size = args.num_envs * args.num_steps
    check(args.batch_size % args.num_minibatches == 0, f"--num-minibatches must divide the batch {args.batch_size}")
    if args.capture_video and not os.environ.get("DISPLAY"):
        usage_error("--capture-video needs a display for µRTS' Java renderer: run under `xvfb-run -a`")
    if args.capture_video and args.eval_only and args.eval_episodes == 0:
        usage_error("--capture-video with --eval-only records an evaluation episode: set --eval-episodes >= 1")
    check(args.eval_games == 0 or len(args.eval_bots) > 0, "--eval-games needs at least one of --eval-bots")
    unknown = [bot for bot in args.eval_bots if bot not in BOT_NAMES]
    check(not unknown, f"unknown --eval-bots {unknown}; choose from {', '.join(BOT_NAMES)}")
    args.minibatch_size = args.batch_size // args.num_minibatches
    # advantage normalisation divides by the minibatch's standard deviation, which one sample does not have
    few = f"--norm-adv needs minibatches of 2 or more samples: lower --num-minibatches (batch {args.batch_size})"
    check(not args.norm_adv or args.minibatch_size > 1, few)
    args.num_iterations = 0 if args.eval_only else max(1, args.total_timesteps // args.batch_size)
    policies = {"sparse": (MAIN,), "shaped": (AUX,)}.get(args.strategy, (MAIN, AUX))  # the policies that learn

    # env setup: "same-step" autoreset (see cleanfive/envs/microrts.py); µRTS takes no seed and its games live in the
    # JVM: on resume the games in progress are lost and restart
    try:
        envs = MicrortsGridEnv(args.map_path, 0, [bot] * args.num_envs, args.max_steps, sparse_weights[:6])
    except (MicrortsUnavailable, ValueError) as exc:
        usage_error(str(exc))
    if num_stages(envs.height, envs.width) == 0:
        usage_error(f"map {args.map_path} is {envs.height}x{envs.width}: the encoder-decoder needs even sides")
    E, HW = args.num_envs, envs.height * envs.width
    env_id = os.path.basename(args.map_path)[: -len(".xml")]
    run_name = checkpoint["run_name"] if checkpoint else f"{env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    wandb_id = checkpoint["wandb_id"] if checkpoint else None  # a resumed run continues its wandb run
    if args.track:
        import wandb

        run = {"project": args.wandb_project_name, "entity": args.wandb_entity, "name": run_name, "id": wandb_id}
        wandb_id = wandb.init(**run, sync_tensorboard=True, config=vars(args), save_code=True, resume="allow").id
    # on resume, TensorBoard drops what the killed run logged after its checkpoint (purge_step)
    writer = SummaryWriter(f"runs/{run_name}", purge_step=checkpoint["global_step"] + 1 if checkpoint else None)
    writer.add_text("hyperparameters", "|param|value|\n|-|-|" + "".join(f"\n|{k}|{v}|" for k, v in vars(args).items()))

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)

    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    agent = nn.ModuleList([Agent(envs.height, envs.width) for _ in POLICY_NAMES]).to(device)  # one net per reward
    weights = torch.tensor([sparse_weights, shaped_weights], dtype=torch.float32, device=device)  # (2, 7)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    if saved:
        try:
            agent.load_state_dict(saved["model"])
        except RuntimeError:
            usage_error(
                f"the model in {args.eval_only} does not fit {args.map_path}: trained on {saved['args']['map_path']}"
            )

    # ALGO Logic: Storage setup
    obs = torch.zeros((args.num_steps, E) + envs.obs_shape).to(device)
    masks = torch.zeros((args.num_steps, E, HW, MASK_SIZE), dtype=torch.bool).to(device)
    actions = torch.zeros((args.num_steps, E, HW, len(ACTION_DIMS)), dtype=torch.long).to(device)
    logprobs = torch.zeros((args.num_steps, E)).to(device)
    rewards = torch.zeros((2, args.num_steps, E)).to(device)  # R_M, R_A1
    dones = torch.zeros((args.num_steps, E)).to(device)
    values = torch.zeros((2, args.num_steps, E)).to(device)  # main and auxiliary value functions

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    next_obs_np, info = envs.reset()
    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)
    next_mask = torch.as_tensor(info["action_mask"], device=device)
    next_done = torch.zeros(E).to(device)
    episode_stats = np.zeros((E, len(STAT_NAMES)))  # per-episode sums of the action_stats counts
    episode_returns = torch.zeros((2, E)).to(device)  # sparse and shaped return of the games in progress
    history = []  # a dict per finished training episode, in order (the summary averages the last 10)
    t_first = float("nan")  # % of total_timesteps at the first positive sparse reward
    plo_skips = [0, 0]  # updates skipped by PLO, per policy
    frames, video_episode, first_iteration, last_checkpoint = [], 0, 1, None
    if checkpoint:
        agent.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        set_rng_states(checkpoint["rng"])
        first_iteration, global_step = checkpoint["iteration"] + 1, checkpoint["global_step"]
        history, t_first, plo_skips = checkpoint["history"], checkpoint["t_first"], checkpoint["plo_skips"]
        video_episode, last_checkpoint = checkpoint["video_episode"], args.resume
        print(f"resumed from {args.resume} at update {first_iteration - 1} (global_step {global_step})", flush=True)
    start_step, start_time = global_step, time.time()
    last_print = start_time

    for iteration in range(first_iteration, args.num_iterations + 1):
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / args.num_iterations
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate

        for step in range(0, args.num_steps):
            global_step += E
            obs[step] = next_obs
            masks[step] = next_mask
            dones[step] = next_done
            epsilon = epsilon_at(global_step, args.total_timesteps, *[getattr(args, key) for key in SCHEDULE_KEYS])

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, values[:, step] = guided_action(agent, policies, next_obs, next_mask, epsilon)
            actions[step], logprobs[step] = action, logprob
            stats = action_stats(next_obs, next_mask, action)
            episode_stats += stats.cpu().numpy()

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs_np, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
            next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)
            next_mask = torch.as_tensor(info["action_mask"], device=device)
            next_done = torch.as_tensor(terminated | truncated, dtype=torch.float32, device=device)
            raw = torch.as_tensor(info["raw_rewards"], dtype=torch.float32, device=device)  # R_M and R_A1 come from
            distance, next_distance = base_distance(obs[step]), base_distance(next_obs)  # these and R_A1's "closer"
            rewards[:, step] = task_rewards(raw, distance, next_distance, next_done.bool(), weights)
            episode_returns += rewards[:, step]
            if np.isnan(t_first) and (rewards[MAIN, step] > 0).any():
                t_first = 100 * global_step / args.total_timesteps
                writer.add_scalar("charts/t_first_percent", t_first, global_step)
            if args.capture_video and video_episode == round(video_episode ** (1 / 3)) ** 3 and step % 10 == 0:
                frames.append(envs.render())  # env 0, every 10th frame of episodes 0, 1, 8, 27, ...
            for i in np.flatnonzero(info.get("_episode", [])):
                sparse, shaped, length = *episode_returns[:, i].tolist(), info["episode"]["l"][i]
                history.append({"sparse_return": sparse, "shaped_return": shaped, "episode_length": length})
                history[-1] |= dict(zip(STAT_NAMES, episode_stats[i], strict=True))
                episode_returns[:, i] = 0
                episode_stats[i] = 0
                writer.add_scalar("charts/episodic_return", sparse, global_step)  # the sparse return
                writer.add_scalar("charts/shaped_episodic_return", shaped, global_step)
                writer.add_scalar("charts/episodic_length", info["episode"]["l"][i], global_step)
                for name, value in zip(REWARD_NAMES, info["episode"]["raw"][i], strict=True):
                    writer.add_scalar(f"charts/raw_{name}", value, global_step)
                for name in STAT_NAMES:
                    writer.add_scalar(f"invalid/{name}", history[-1][name], global_step)
                if i == 0 and args.capture_video:
                    if frames:
                        save_gif(frames, f"videos/{run_name}/episode_{video_episode}.gif")
                    frames, video_episode = [], video_episode + 1

        # ALGO LOGIC: GAE and the PPO update of each policy on the same rollout (Eq. 8.1; PPO clipping: Eq. 8.2)
        rollout = dict(obs=obs, masks=masks, actions=actions, logprobs=logprobs, dones=dones)
        finite = torch.ones((), dtype=torch.bool, device=device)  # every minibatch's loss was finite
        for p in policies:
            skipped = args.plo and not rewards[p].any()  # PLO (Section 8.3.2): no reward for it, no update
            writer.add_scalar(f"charts/plo_skipped_{POLICY_NAMES[p]}", float(skipped), global_step)
            if skipped:
                plo_skips[p] += 1
                continue
            rollout |= dict(rewards=rewards[p], values=values[p])
            losses, ok = ppo_update(args, agent[p], optimizer, rollout, next_obs, next_done, True, True)  # masking
            finite &= ok
            for name, value in losses.items():  # CleanRL's keys for the main policy, suffixed for the auxiliary one
                writer.add_scalar(f"losses/{name}{'' if p == MAIN else '_aux'}", value, global_step)

        # numerical faults: the losses and the parameters, checked once per update before anything is saved
        if not (finite & torch.stack([param.isfinite().all() for param in agent.parameters()]).all()):
            fault_stop(iteration, last_checkpoint)

        # TRY NOT TO MODIFY: record rewards for plotting purposes
        sps = int((global_step - start_step) / (time.time() - start_time))
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        writer.add_scalar("charts/epsilon", epsilon, global_step)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 10 or iteration == args.num_iterations:
            last_print = time.time()
            eta = (args.num_iterations - iteration) * (last_print - start_time) / (iteration - first_iteration + 1)
            recent = f"{np.mean([h['sparse_return'] for h in history[-10:]]):.2f}" if history else "-"
            line = f"update {iteration}/{args.num_iterations} global_step={global_step} SPS={sps} ETA={eta:.0f}s"
            print(f"{line} epsilon={epsilon:.3f} sparse_return_last10={recent}", flush=True)

        # checkpoint: everything the next update depends on except the games in progress (they live in the JVM)
        if args.save_every and iteration % args.save_every == 0:
            writer.flush()  # the logs up to this update survive a kill
            last_checkpoint = f"runs/{run_name}/checkpoint.pt"
            state = {"args": vars(args), "run_name": run_name, "iteration": iteration, "global_step": global_step}
            state |= {"model": agent.state_dict(), "rng": rng_states(), "optimizer": optimizer.state_dict()}
            state |= {"history": history, "t_first": t_first, "plo_skips": plo_skips, "video_episode": video_episode}
            atomic_save(state | {"wandb_id": wandb_id}, last_checkpoint)

    if args.save_model and not args.eval_only:
        model_path = f"runs/{run_name}/{args.exp_name}.cleanfive_model"
        atomic_save({"args": vars(args), "model": agent.state_dict()}, model_path)
        print(f"model saved to {model_path}")

    # final evaluation, acting as at the end of training with ε = epsilon_end (main, aux or both policies act)
    keys = ("sparse_return", "shaped_return", "episode_length", *STAT_NAMES)  # means over the last 10 training episodes
    summary = {"task": args.task, "strategy": args.strategy, "plo": args.plo, "episodes": len(history)}
    summary |= {key: np.mean([h[key] for h in history[-10:]]) if history else np.nan for key in keys}
    summary.update(t_first=t_first, plo_skips_main=plo_skips[MAIN], plo_skips_aux=plo_skips[AUX])
    summary.update(SPS=(global_step - start_step) / (time.time() - start_time))
    if args.eval_episodes > 0:
        video_path = f"videos/{run_name}/eval.gif" if args.capture_video else None
        result = evaluate(agent, policies, envs, weights, device, args.epsilon_end, args.eval_episodes, video_path)
        for name, value in zip(("sparse_return", "shaped_return"), result, strict=True):
            summary[f"eval_{name}"] = value
            writer.add_scalar(f"eval/{name}", value, global_step)
    envs.close()

    # final TrueSkill league: the agent and the bots rated together (one line per bot: win/draw/loss, mu)
    if args.eval_games > 0:
        wdl, ratings = play_league(agent, args, device)
        for bot, (win, draw, loss) in wdl.items():
            print(f"league bot={bot} win={win} draw={draw} loss={loss} mu={ratings[bot].mu:.2f}", flush=True)
            writer.add_scalar(f"league/winrate_{bot}", win / args.eval_games, global_step)
        summary["trueskill_mu"] = ratings["agent"].mu
        writer.add_scalar("league/trueskill_mu", ratings["agent"].mu, global_step)
        writer.add_scalar("league/trueskill_sigma", ratings["agent"].sigma, global_step)
    print("summary " + " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()))
    writer.close()
    print(f"params_sha256={params_sha256(agent)}")
