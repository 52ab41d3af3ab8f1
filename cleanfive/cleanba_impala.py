# docs and experiment results: docs/cleanba_impala.md (mkdocs site: `uv run --all-extras mkdocs serve`)
import contextlib
import copy
import hashlib
import os
import queue
import random
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import tyro
from PIL import Image
from torch.utils.tensorboard import SummaryWriter

from cleanfive.envs.atari import ATARI_ENV_IDS, EpisodeStatistics, make_atari, pool_seed


@dataclass
class Args:
    exp_name: str = os.path.basename(__file__)[: -len(".py")]  # the name of this experiment
    seed: int = 1  # seed of the experiment
    deterministic: bool = True  # if toggled, deterministic torch kernels: equal seeds give bit-identical parameters
    cuda: bool = True  # if toggled, cuda will be enabled when available
    track: bool = False  # if toggled, this experiment will be tracked with Weights and Biases
    wandb_project_name: str = "cleanfive"  # the wandb's project name
    wandb_entity: str | None = None  # the entity (team) of wandb's project
    save_model: bool = False  # whether to save the final model (with its `Args`) into `runs/{run_name}`
    torch_threads: int = 1  # torch's intra-op CPU threads (one pool shared by the actor threads and the learner)
    save_every: int = 200  # write `runs/{run_name}/checkpoint.pt` (atomically) every this many updates (0: never)
    resume: str | None = None  # continue from a `checkpoint.pt` with its `Args` (the games in progress restart)
    eval_only: str | None = None  # path of a saved model (or checkpoint): play `--eval-episodes` games and exit
    eval_episodes: int = 10  # games played by `--eval-only`, one per environment (all lives, the real game score)
    capture_video: bool = False  # with `--eval-only`: save the first game as `videos/{run_name}/episode_0.gif`

    # Algorithm specific arguments
    env_id: str = "Breakout-v5"  # the id of the environment (any Atari v5 id of envpool, e.g. Breakout-v5, Pong-v5)
    total_timesteps: int = 2_000_000  # total environment steps, summed over all learner processes
    learning_rate: float = 2.5e-4  # the learning rate of the optimizer
    local_num_envs: int = 16  # the number of parallel environments of each learner process (split over its actors)
    num_actor_threads: int = 1  # the number of actor threads of each learner process (each steps its own envpool)
    num_steps: int = 32  # the number of steps of each rollout (the V-trace unroll length)
    anneal_lr: bool = True  # toggle learning rate annealing
    gamma: float = 0.99  # the discount factor gamma
    vtrace_lambda: float = 1.0  # the V-trace mixing parameter lambda (c_i = lambda * min(1, rho_i))
    vtrace_rho_bar: float = 1.0  # rho-bar: clip threshold of the importance ratios in the value targets
    vtrace_pg_rho_bar: float = 1.0  # rho-bar_pg: clip threshold of the importance ratios in the pg advantages
    num_minibatches: int = 4  # the number of mini-batches of whole env trajectories; one pass, one step each
    ent_coef: float = 0.01  # coefficient of the entropy
    vf_coef: float = 0.5  # coefficient of the value function
    max_grad_norm: float = 0.5  # the maximum norm for the gradient clipping
    sync: bool = False  # if toggled, the actor waits for the learner: every rollout uses the latest parameters
    policy_lag: int | None = None  # the actor's parameters are this many versions old (default 1; 0 with --sync)

    # to be filled in runtime
    world_size: int = 0  # the number of learner processes (from torchrun)
    local_batch_size: int = 0  # the batch size of each learner process: local_num_envs * num_steps
    batch_size: int = 0  # the batch size over all processes: world_size * local_batch_size
    num_updates: int = 0  # the number of learner updates = the number of rollouts of each actor


# what --save-every writes besides `args`: enough to continue the run where it stopped
CHECKPOINT_KEYS = ("run_name", "iteration", "global_step", "model", "optimizer", "versions", "actor_rng", "rng")


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


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, num_actions: int):
        super().__init__()
        self.network = nn.Sequential(  # the Nature CNN
            layer_init(nn.Conv2d(4, 32, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)),
            nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_logits_and_value(self, x):
        # x: uint8 (*B, 4, 84, 84) -> logits (*B, A), value (*B,), for any batch shape B
        hidden = self.network(x.flatten(0, -4) / 255.0)
        return self.actor(hidden).unflatten(0, x.shape[:-3]), self.critic(hidden).squeeze(-1).unflatten(0, x.shape[:-3])


def vtrace(values, rewards, discounts, log_rhos, lam=1.0, rho_bar=1.0, pg_rho_bar=1.0, c_bar=1.0):
    """V-trace targets and policy-gradient advantages (IMPALA, Espeholt et al. 2018, section 4), time-major.

    values: (T + 1, B) V(x_0..x_T) of the current value function, x_T the bootstrap observation; rewards,
    discounts (gamma, or 0 where the step ended the episode), log_rhos (log pi/mu of the taken actions): (T, B).
    Returns vs (T, B), the V-trace value targets, and pg_advantages (T, B) = rho_pg_s (r_s + gamma_s v_{s+1} - V(x_s)).
    """
    rhos = log_rhos.exp()
    clipped_rhos = rhos.clamp(max=rho_bar)
    cs = lam * rhos.clamp(max=c_bar)
    deltas = clipped_rhos * (rewards + discounts * values[1:] - values[:-1])
    # v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})), computed backwards from v_T - V(x_T) = 0
    vs_minus_v = torch.zeros_like(values)
    for t in reversed(range(rewards.shape[0])):
        vs_minus_v[t] = deltas[t] + discounts[t] * cs[t] * vs_minus_v[t + 1]
    vs = values[:-1] + vs_minus_v[:-1]
    vs_next = torch.cat([vs[1:], values[-1:]])  # v_{s+1}, and V(x_T) after the last step
    pg_advantages = rhos.clamp(max=pg_rho_bar) * (rewards + discounts * vs_next - values[:-1])
    return vs, pg_advantages


def sample(logits, generator):
    """Gumbel-max with the caller's own generator: argmax(logits - log(-log u)), u ~ U(0, 1), as Cleanba samples."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device)
    return (logits - torch.log(-torch.log(u))).argmax(dim=-1)


@torch.no_grad()  # grad mode is per thread: the actor never builds a graph
def actor_thread(envs, agent, versions, param_queue, rollout_queue, generator, args, device, first_rollout):
    """Collect rollouts first_rollout .. num_updates - 1, rollout r with parameter version max(0, r - policy_lag).

    `versions` ({version: parameters}) are the learner's after its newest update; before rollout r the actor takes
    those after update r - fetch_lag from `param_queue` (fetch_lag 0 with policy lag 0: it waits for the learner).
    """
    try:
        E, T, lag = args.local_num_envs // args.num_actor_threads, args.num_steps, args.policy_lag
        fetch_lag = min(lag, 1)
        stats = EpisodeStatistics(E)
        next_obs = torch.as_tensor(envs.reset()[0], device=device)
        next_done = torch.zeros(E, dtype=torch.bool, device=device)
        for r in range(first_rollout, args.num_updates):
            wait_start = time.time()
            if r - fetch_lag > max(versions):  # the learner sends one message per update, in order
                item = param_queue.get()
                if item is None:
                    return
                versions = item
            param_wait = time.time() - wait_start
            version = max(0, r - lag)
            agent.load_state_dict(versions[version])

            # ALGO LOGIC: one rollout, time-major; obs gets one more row, x_T, the bootstrap observation
            ro = {key: [] for key in ("obs", "actions", "logprobs", "rewards", "dones", "valid")}
            episodes = []  # (real game return, length) of each game that ended
            for _ in range(T):
                ro["obs"].append(next_obs)
                # envpool autoresets "next-step": after a done, this step resets and ignores the action; not learned
                ro["valid"].append((~next_done).float())
                logits, _ = agent.get_logits_and_value(next_obs)
                action = sample(logits, generator)  # the actor's own generator, never one shared by threads
                ro["logprobs"].append(F.log_softmax(logits, dim=-1).gather(-1, action[:, None]).squeeze(-1))
                ro["actions"].append(action)

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs_np, reward, terminated, truncated, info = envs.step(action.cpu().numpy())
                assert (info["env_id"] == np.arange(E)).all()  # rows in env order (synchronous stepping)
                ro["rewards"].append(torch.as_tensor(reward, dtype=torch.float32, device=device))  # clipped
                next_done = torch.as_tensor(terminated | truncated, device=device)  # a lost life is a done
                ro["dones"].append(next_done.float())
                next_obs = torch.as_tensor(next_obs_np, device=device)
                _, returns, lengths = stats.update(info, truncated)  # real game returns, unclipped
                episodes += zip(returns.tolist(), lengths.tolist(), strict=True)
            ro["obs"].append(next_obs)
            rollout = {key: torch.stack(values) for key, values in ro.items()}  # (T[+1], E, ...)
            rollout |= {"version": version, "episodes": episodes, "param_wait": param_wait}
            rollout_queue.put(rollout | {"rng": generator.get_state()})  # where rollout r + 1 starts, for checkpoints
    except BaseException as error:  # hand the failure to the learner instead of leaving it waiting
        rollout_queue.put(error)


def stop_actors(threads, param_queues, rollout_queues):
    """Stop the actor threads at their next parameter fetch (a None version) and wait for them to end: on any exit,
    Python must not tear down envpool under a thread that is stepping it, or the process aborts."""
    while any(thread.is_alive() for thread in threads):
        for param_queue, rollout_queue in zip(param_queues, rollout_queues, strict=True):
            with contextlib.suppress(queue.Empty):
                rollout_queue.get_nowait()  # a thread may be waiting to hand over a rollout
            with contextlib.suppress(queue.Full):
                param_queue.put_nowait(None)
        for thread in threads:
            thread.join(timeout=0.05)


@torch.no_grad()
def evaluate(agent, envs, generator, device, video_path):
    """Play one game (all lives) in each env, sampling as the actor does; returns the real game scores (E,). With
    `video_path`, env 0's game is saved there as a GIF of the newest observation frames (84x84 grayscale)."""
    stats = EpisodeStatistics(len(envs))
    returns = np.full(len(envs), np.nan)
    next_obs, _ = envs.reset()
    frames = [next_obs[0, -1]]
    while np.isnan(returns).any():
        logits, _ = agent.get_logits_and_value(torch.as_tensor(next_obs, device=device))
        next_obs, _, _, truncated, info = envs.step(sample(logits, generator).cpu().numpy())
        if np.isnan(returns[0]):
            frames.append(next_obs[0, -1])
        ended, game_returns, _ = stats.update(info, truncated)
        first = np.isnan(returns[ended])  # only the first game of each env counts
        returns[ended[first]] = game_returns[first]
    if video_path:
        os.makedirs(os.path.dirname(video_path), exist_ok=True)
        gif = [Image.fromarray(frame).resize((168, 168), Image.NEAREST) for frame in frames]
        gif[0].save(video_path, save_all=True, append_images=gif[1:], duration=33, loop=0)
        print(f"video saved to {video_path}")
    return returns


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
    check(args.env_id in ATARI_ENV_IDS, f"--env-id {args.env_id}: use an Atari v5 id of envpool, e.g. Breakout-v5")
    positive = ["total_timesteps", "learning_rate", "local_num_envs", "num_actor_threads", "num_steps"]
    positive += ["num_minibatches", "vtrace_rho_bar", "vtrace_pg_rho_bar", "vf_coef", "max_grad_norm", "torch_threads"]
    for name in [*positive, "eval_episodes"]:
        check(getattr(args, name) > 0, f"--{name.replace('_', '-')} {getattr(args, name)} is out of range: must be > 0")
    check(0 < args.gamma <= 1, f"--gamma {args.gamma} is out of range: it must be in (0, 1]")
    check(0 <= args.vtrace_lambda <= 1, f"--vtrace-lambda {args.vtrace_lambda} is out of range: it must be in [0, 1]")
    check(args.ent_coef >= 0, f"--ent-coef {args.ent_coef} is out of range: it must be >= 0")
    check(args.save_every >= 0, f"--save-every {args.save_every} is out of range: it must be >= 0 (0: never)")
    if args.policy_lag is None:
        args.policy_lag = 0 if args.sync else 1
    check(args.policy_lag >= 0 and not (args.sync and args.policy_lag), "use --sync alone, or --policy-lag K >= 0")
    args.sync = args.policy_lag == 0
    check(args.local_num_envs % args.num_actor_threads == 0, "--local-num-envs must split across --num-actor-threads")
    check(args.local_num_envs % args.num_minibatches == 0, "--local-num-envs must split into --num-minibatches")
    check(args.eval_only or not args.capture_video, "--capture-video records a saved model: use it with --eval-only")

    # multi-learner: one process per learner under torchrun; gloo on CPU, NCCL on GPU (one GPU per process)
    distributed = "WORLD_SIZE" in os.environ
    check(not (distributed and args.eval_only), "--eval-only runs in one process: start it with python, not torchrun")
    use_cuda = torch.cuda.is_available() and args.cuda
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    if distributed:
        # torch._dynamo (the optimizer imports it) holds on to a process group made before its import, and then
        # destroy_process_group cannot stop gloo's threads, one of which may abort the exit: import it first
        import torch._dynamo  # noqa: F401

        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    rank = dist.get_rank() if distributed else 0
    args.world_size = dist.get_world_size() if distributed else 1
    args.local_batch_size = args.local_num_envs * args.num_steps
    args.batch_size = args.world_size * args.local_batch_size
    args.num_updates = max(1, args.total_timesteps // args.batch_size)
    num_seeds = max(args.world_size * args.local_num_envs, args.eval_episodes)  # env seeds: seed + env index
    check(0 <= args.seed <= 2**31 - num_seeds, f"--seed {args.seed} must be in [0, 2**31 - {num_seeds}] (int32)")
    same_world = not checkpoint or checkpoint["args"]["world_size"] == args.world_size
    check(same_world, f"resume {args.resume} with as many learner processes as wrote it (torchrun --nproc_per_node)")
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"  # rank 0's is the one used
    run_name = checkpoint["run_name"] if checkpoint else run_name

    # TRY NOT TO MODIFY: seeding (the same network seed on every learner, so they start identical)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    if args.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS; read at cuBLAS init
        torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = args.deterministic
    torch.backends.cudnn.benchmark = not args.deterministic

    if args.eval_only:  # play one game per env with a saved model, print the scores, and stop
        envs = make_atari(args.env_id, args.eval_episodes, args.seed)
        agent = Agent(envs.action_space.n).to(device)
        try:
            agent.load_state_dict(saved["model"])
        except RuntimeError:  # another game's action count
            usage_error(f"the model in {args.eval_only} was trained on {saved['args']['env_id']}: pass that --env-id")
        video_path = f"videos/{run_name}/episode_0.gif" if args.capture_video else None
        returns = evaluate(agent, envs, torch.Generator(device=device).manual_seed(args.seed), device, video_path)
        scores = f"mean_return={returns.mean():.2f} std={returns.std():.2f} returns={returns.tolist()}"
        print(f"eval env_id={args.env_id} episodes={len(returns)} {scores}")
        sys.exit(0)

    writer = wandb_id = None
    if rank == 0:
        if args.track:
            import wandb

            wandb_id = checkpoint["wandb_id"] if checkpoint else None  # a resumed run continues its wandb run
            run = {"project": args.wandb_project_name, "entity": args.wandb_entity, "name": run_name, "id": wandb_id}
            wandb_id = wandb.init(**run, sync_tensorboard=True, config=vars(args), save_code=True, resume="allow").id
        # on resume, TensorBoard drops what the killed run logged after its checkpoint (purge_step)
        writer = SummaryWriter(f"runs/{run_name}", purge_step=checkpoint["global_step"] + 1 if checkpoint else None)
        table = "\n".join([f"|{key}|{value}|" for key, value in vars(args).items()])
        writer.add_text("hyperparameters", f"|param|value|\n|-|-|\n{table}")

    # env setup: actor thread j of learner `rank` steps env pool p = rank * num_actor_threads + j, whose env i gets
    # seed env_seed + p * envs_per_pool + i (pool_seed): no two envs share a seed. Its sampler: SeedSequence([seed, p]).
    # On resume the games in progress are lost (envpool cannot save them): env_seed is derived from (seed, update).
    first_update = checkpoint["iteration"] + 1 if checkpoint else 1
    env_seed = args.seed
    if checkpoint:
        env_seed = int(np.random.SeedSequence([args.seed, first_update]).generate_state(1)[0]) % (2**31 - num_seeds)
    envs_per_pool = args.local_num_envs // args.num_actor_threads
    pool_indices = [rank * args.num_actor_threads + j for j in range(args.num_actor_threads)]
    envs = [make_atari(args.env_id, envs_per_pool, pool_seed(env_seed, p, envs_per_pool)) for p in pool_indices]
    generators = [torch.Generator(device=device) for _ in pool_indices]
    for j, (generator, p) in enumerate(zip(generators, pool_indices, strict=True)):
        generator.manual_seed(int(np.random.SeedSequence([args.seed, p]).generate_state(1)[0]))
        if checkpoint:  # where the checkpoint's next rollout starts
            generator.set_state(checkpoint["actor_rng"][rank][j])

    agent = Agent(envs[0].action_space.n).to(device)
    if distributed:
        for param in agent.parameters():
            dist.broadcast(param.data, src=0)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, foreach=True)  # one kernel per op
    versions = {0: {k: v.detach().clone() for k, v in agent.state_dict().items()}}  # what an actor may still use

    # TRY NOT TO MODIFY: start the game
    global_step, num_episodes, recent_returns, last_checkpoint = 0, 0, deque(maxlen=100), None
    if checkpoint:
        agent.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        versions = {v: {k: t.to(device) for k, t in p.items()} for v, p in checkpoint["versions"].items()}
        set_rng_states(checkpoint["rng"])
        global_step, num_episodes = checkpoint["global_step"], checkpoint["num_episodes"]
        recent_returns.extend(checkpoint["recent_returns"])
        last_checkpoint = args.resume
        if rank == 0:
            print(f"resumed from {args.resume} at update {first_update - 1} (global_step {global_step})", flush=True)

    # Cleanba's architecture: each actor thread and the learner are joined by two queues of size 1
    param_queues = [queue.Queue(maxsize=1) for _ in pool_indices]
    rollout_queues = [queue.Queue(maxsize=1) for _ in pool_indices]
    threads = []
    for env, pq, rq, generator in zip(envs, param_queues, rollout_queues, generators, strict=True):
        actor_args = (env, copy.deepcopy(agent), versions, pq, rq, generator, args, device, first_update - 1)
        threads.append(threading.Thread(target=actor_thread, args=actor_args, daemon=True))
    start_step, start_time = global_step, time.time()
    last_print = start_time
    for thread in threads:
        thread.start()

    fetch_lag = min(args.policy_lag, 1)
    m = args.local_num_envs // args.num_minibatches  # trajectories per minibatch
    vtrace_coefs = {"lam": args.vtrace_lambda, "rho_bar": args.vtrace_rho_bar, "pg_rho_bar": args.vtrace_pg_rho_bar}
    try:  # every exit (the end, a numerical fault, an error, Ctrl-C) stops the actor threads first (`finally`)
        for update in range(first_update, args.num_updates + 1):
            wait_start = time.time()
            rollouts = [q.get() for q in rollout_queues]  # in thread order: a fixed consumption order
            rollout_wait = time.time() - wait_start
            if errors := [ro for ro in rollouts if isinstance(ro, BaseException)]:
                raise RuntimeError("an actor thread failed") from errors[0]
            keys = ("obs", "actions", "logprobs", "rewards", "dones", "valid")
            b = {k: torch.cat([ro[k] for ro in rollouts], dim=1) for k in keys}  # (T[+1], local_num_envs, ...)
            actor_version = rollouts[0]["version"]  # the learner starts from version update - 1
            global_step += args.batch_size

            if args.anneal_lr:
                frac = 1.0 - (update - 1.0) / args.num_updates
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            # ALGO LOGIC: one pass over the rollout in minibatches of whole trajectories, one gradient step each
            logs = {key: [] for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "max_abs_logratio")}
            finite = torch.ones((), device=device)  # 1: every minibatch's loss was finite
            for start in range(0, args.local_num_envs, m):
                mb = {k: v[:, start : start + m] for k, v in b.items()}  # obs: (T + 1, m, 4, 84, 84)
                logits, values = agent.get_logits_and_value(mb["obs"])  # (T + 1, m, A), (T + 1, m)
                logp_all = F.log_softmax(logits[:-1], dim=-1)
                newlogprob = (logp_all * F.one_hot(mb["actions"], logp_all.shape[-1])).sum(-1)
                entropy = -(logp_all.exp() * logp_all).sum(-1)
                logratio = newlogprob.detach() - mb["logprobs"]
                discounts = args.gamma * (1.0 - mb["dones"])  # a done (lost life or game over) cuts the bootstrap
                vs, pg_advantages = vtrace(values.detach(), mb["rewards"], discounts, logratio, **vtrace_coefs)
                w = mb["valid"]  # 0 on envpool's reset steps
                n = w.sum().clamp(min=1)
                pg_loss = -(pg_advantages * newlogprob * w).sum() / n
                v_loss = 0.5 * (((values[:-1] - vs) ** 2) * w).sum() / n
                entropy_loss = (entropy * w).sum() / n
                loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                optimizer.zero_grad()
                loss.backward()
                if distributed:  # average the gradients of all learners: one flat all_reduce
                    grads = [p.grad for p in agent.parameters()]
                    flat = torch.cat([g.reshape(-1) for g in grads])
                    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
                    flat /= args.world_size
                    for g, mean in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
                        g.copy_(mean.view_as(g))
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                finite *= loss.isfinite()

                approx_kl = (((logratio.exp() - 1) - logratio) * w).sum() / n  # KL(mu || pi)
                max_abs_logratio = (logratio.abs() * w).max()  # ~0 when on-policy
                for key, value in zip(logs, (pg_loss, v_loss, entropy_loss, approx_kl, max_abs_logratio), strict=True):
                    logs[key].append(value.item())

            # numerical faults: the losses and the parameters, checked once per update before anything is sent or saved
            finite *= torch.stack([param.isfinite().all() for param in agent.parameters()]).all()
            if distributed:  # a fault on any learner stops them all
                dist.all_reduce(finite, op=dist.ReduceOp.MIN)
            if not finite.item():
                if rank != 0:  # rank 0 prints the line
                    sys.exit(1)
                fault_stop(update, last_checkpoint)

            # hand the new version to the actors, with the older ones they may still act with (none unused is sent)
            params = {k: v.detach().clone() for k, v in agent.state_dict().items()}
            versions = {v: p for v, p in versions.items() if v >= update - args.policy_lag} | {update: params}
            if update + fetch_lag <= args.num_updates - 1:
                for q in param_queues:
                    q.put(versions)  # a new dict each update: the actors only read it

            # TRY NOT TO MODIFY: record rewards for plotting purposes
            if writer is not None:
                for episodic_return, episodic_length in (episode for ro in rollouts for episode in ro["episodes"]):
                    recent_returns.append(episodic_return)
                    num_episodes += 1
                    writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                    writer.add_scalar("charts/episodic_length", episodic_length, global_step)
                sps = int((global_step - start_step) / (time.time() - start_time))
                for key in ("policy_loss", "value_loss", "entropy", "approx_kl"):
                    writer.add_scalar(f"losses/{key}", np.mean(logs[key]), global_step)
                writer.add_scalar("losses/first_minibatch_max_abs_logratio", logs["max_abs_logratio"][0], global_step)
                writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
                writer.add_scalar("charts/actor_policy_version", actor_version, global_step)
                writer.add_scalar("charts/learner_policy_version", update - 1, global_step)
                writer.add_scalar("charts/policy_version_lag", update - 1 - actor_version, global_step)
                writer.add_scalar("stats/rollout_queue_get_time", rollout_wait, global_step)
                writer.add_scalar("stats/param_queue_get_time", sum(ro["param_wait"] for ro in rollouts), global_step)
                writer.add_scalar("charts/SPS", sps, global_step)
                if time.time() - last_print > 10 or update == args.num_updates:
                    last_print = time.time()
                    eta = (args.num_updates - update) * (last_print - start_time) / (update - first_update + 1)
                    mean_return = np.mean(recent_returns) if recent_returns else float("nan")
                    progress = f"update {update}/{args.num_updates} global_step={global_step} SPS={sps}"
                    returns = f"episodic_return(last {len(recent_returns)})={mean_return:.2f}"
                    print(f"{progress} {returns} ETA={eta:.0f}s", flush=True)

            # checkpoint: the learner after this update and each actor's generator at the start of its next rollout
            # (carried by the rollout just used), so no thread needs to stop; one file, written by rank 0
            if args.save_every and update % args.save_every == 0:
                actor_rng = [[ro["rng"] for ro in rollouts]] * args.world_size  # [rank][thread]
                if distributed:
                    dist.all_gather_object(actor_rng, actor_rng[rank])
                if rank == 0:
                    writer.flush()  # the logs up to this update survive a kill
                    last_checkpoint = f"runs/{run_name}/checkpoint.pt"
                    state = {"args": vars(args), "run_name": run_name, "iteration": update, "global_step": global_step}
                    state |= {"model": agent.state_dict(), "optimizer": optimizer.state_dict(), "versions": versions}
                    state |= {"actor_rng": actor_rng, "rng": rng_states(), "num_episodes": num_episodes}
                    state |= {"recent_returns": list(recent_returns), "wandb_id": wandb_id}
                    atomic_save(state, last_checkpoint)
    finally:
        stop_actors(threads, param_queues, rollout_queues)
    wall = time.time() - start_time

    hashes = [params_sha256(agent)] * args.world_size
    if distributed:  # every learner must end bit-identical (the all_reduce keeps them in lockstep)
        dist.all_gather_object(hashes, hashes[rank])
    if rank == 0:
        speed = f"SPS={(global_step - start_step) / wall:.1f} wall={wall:.1f}s episodes={num_episodes}"
        learners = f"learners={args.world_size} learners_identical={len(set(hashes)) == 1}"
        print(f"final global_step={global_step} {speed} {learners} params_sha256={hashes[0]}", flush=True)
        if args.save_model:
            model_path = f"runs/{run_name}/{args.exp_name}.cleanfive_model"
            atomic_save({"args": vars(args), "model": agent.state_dict()}, model_path)
            print(f"model saved to {model_path}")
        writer.close()
    if distributed:
        # a gloo worker drops its last collective's tensors (taking the GIL) just after the collective returns, and a
        # drop that falls in interpreter shutdown aborts the process (std::terminate): waiting here for the other
        # process, GIL released, lets it finish first
        dist.barrier()
        dist.destroy_process_group()
