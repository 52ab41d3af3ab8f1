"""Self-play's matchmaking (OpenAI Five, Appendix N) for the team scripts (ppo_lstm_selfplay.py, five_surgery.py):
which opponent each game plays (the latest policy itself, a past version from the pool of
:class:`cleanfive.trueskill_league.OpponentPool`, or a bot), which rows the learner drives, and the opponents' moves.
"""

import numpy as np
import torch

# the opponent of each game: its kind, and for PAST its index in the pool, for BOT its bot
LATEST, PAST, BOT = 0, 1, 2  # LATEST: the latest policy drives both sides


class Matchmaking:
    """Self-play's opponents (Appendix N), per game: `kind` (LATEST, PAST or BOT), `index` (PAST: the version's index
    in the pool; BOT: the bot's in `bots`, the bot games' bots) and `learner_side` (0 in self-play; the other: the
    opponent's). Of the games not against a past version (`past_fraction` of them once the pool has one), a share
    against a bot when `bot_games` is on (off: no lots drawn for them, so that a run without bot games draws what
    it drew before they existed)."""

    def __init__(self, num_games, num_sides, num_heroes, bots, past_fraction, bot_games):
        self.kind = np.full(num_games, LATEST)
        self.index = np.zeros(num_games, dtype=np.int64)
        self.learner_side = np.zeros(num_games, dtype=np.int64)
        self.num_sides, self.num_heroes = num_sides, num_heroes
        self.bots, self.past_fraction, self.bot_games = bots, past_fraction, bot_games

    def learner_rows(self):
        """(E * S * N,) bool, rows (game, side, hero): the heroes that the latest policy drives (every hero of a game
        against itself, else the heroes of the learner's side)."""
        side = np.repeat(np.arange(self.num_sides), self.num_heroes)  # the side of each hero of a game
        return ((self.kind == LATEST)[:, None] | (side[None] == self.learner_side[:, None])).reshape(-1)

    def opponent_rows(self, games):
        """The rows (game, side, hero) of the opponent's heroes in `games` (ascending), in row order."""
        side = 1 - self.learner_side[games]
        return ((games * self.num_sides + side)[:, None] * self.num_heroes + np.arange(self.num_heroes)).reshape(-1)

    def past_actions(self, past_agents, x, state, done, team_acts, mask):
        """The past versions' moves in their own games, each from its own network (the inputs are
        get_action_and_value's, for every row): the rows (game, side, hero) they drive, their actions there and those
        rows' LSTM states after this step."""
        nothing = torch.zeros(0, dtype=torch.long, device=x.device)
        parts = [(nothing, nothing, state[0][:, :0], state[1][:, :0])]  # rows, actions, h, c; cat needs one
        for k in np.unique(self.index[self.kind == PAST]):
            games = np.flatnonzero((self.kind == PAST) & (self.index == k))
            mine = torch.as_tensor(self.opponent_rows(games), device=x.device)
            action, _, _, _, (h, c) = past_agents[k].get_action_and_value(
                x[mine], (state[0][:, mine], state[1][:, mine]), done[mine], team_acts[mine], mask[mine]
            )
            parts.append((mine, action, h, c))
        rows, actions, h, c = zip(*parts, strict=True)
        return torch.cat(rows), torch.cat(actions), (torch.cat(h, 1), torch.cat(c, 1))

    def bot_actions(self, envs, obs_np, info, rng, device):
        """The bots' moves in their own games, from the world's state (a bot has no LSTM): the rows (game, side,
        hero) they drive and their actions there."""
        rows, actions = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for b in np.unique(self.index[self.kind == BOT])[::-1]:  # the last first: seeded runs repeat
            games = (self.kind == BOT) & (self.index == b)
            rows.append(self.opponent_rows(np.flatnonzero(games)))
            bot = envs.bot_actions(self.bots[b], obs_np, info, 1 - self.learner_side, rng, games)
            actions.append(bot[games].reshape(-1))
        return tuple(torch.as_tensor(np.concatenate(part), device=device) for part in (rows, actions))

    def new_games(self, games, pool, bot_share, rng):
        """Draw the opponents of the new `games`: a past version from `pool` with probability past_fraction (none
        while the pool is empty), else the latest policy; of those others, a share `bot_share` against a bot
        when the bot curriculum is on. The learner's side is drawn in the games against a past version or a bot."""
        vs_past = (rng.random(games.size) < self.past_fraction) & bool(pool.keys)
        past = games[vs_past]
        self.kind[games], self.learner_side[games] = LATEST, 0
        if past.size > 0:
            self.kind[past], self.index[past] = PAST, pool.sample(rng, past.size)
            self.learner_side[past] = rng.integers(self.num_sides, size=past.size)
        if self.bot_games:
            other = games[~vs_past]
            vs_bot = other[rng.random(other.size) < bot_share]
            self.kind[vs_bot], self.index[vs_bot] = BOT, rng.choice(len(self.bots), size=vs_bot.size)
            self.learner_side[vs_bot] = rng.integers(self.num_sides, size=vs_bot.size)

    def state_dict(self):
        return {
            "opponent_kind": self.kind.copy(),
            "opponent_index": self.index.copy(),
            "learner_side": self.learner_side.copy(),
        }

    def load_state_dict(self, state):
        self.kind, self.index = state["opponent_kind"], state["opponent_index"]
        self.learner_side = state["learner_side"]
