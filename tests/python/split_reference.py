"""galley's DDP split written again from its definition (docs/sampling.md §9),
in plain Python integers, to check galleyd's shards against values nobody
copied from it.

The generator is checked against the published outputs of SplitMix64 and
xoshiro256** (test_ddp_split.py), so the split is pinned to those algorithms,
not to galley's code.
"""

MASK = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def splitmix64(x):
    """The output of SplitMix64 whose state was x before the step."""
    return mix64((x + GOLDEN_GAMMA) & MASK)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


class Xoshiro256StarStar:
    """Blackman and Vigna's xoshiro256**, its state filled by SplitMix64."""

    def __init__(self, seed=None, state=None):
        if state is None:
            state, x = [], seed
            for _ in range(4):
                x = (x + GOLDEN_GAMMA) & MASK
                state.append(mix64(x))
        self.s = list(state)

    def next(self):
        s = self.s
        result = (_rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        return result

    def below(self, n):
        """Lemire's bounded integer: uniform in [0, n), rejecting the low
        products that would favour some results."""
        product = self.next() * n
        if (product & MASK) < n:
            threshold = ((1 << 64) - n) % n
            while (product & MASK) < threshold:
                product = self.next() * n
        return product >> 64


def epoch_order(items, seed, epoch, shuffle=True):
    """The epoch's permutation of `items` (sorted ids): Fisher-Yates from the
    last position down, seeded by splitmix64(seed ^ splitmix64(epoch + 0x5eed))."""
    order = list(items)
    if shuffle:
        rng = Xoshiro256StarStar(splitmix64(seed ^ splitmix64((epoch + 0x5EED) & MASK)))
        for i in range(len(order), 1, -1):
            j = rng.below(i)
            order[i - 1], order[j] = order[j], order[i - 1]
    return order


def slot(rank, world_size, local_world_size=0, shuffle=True):
    """Node-major slots on a known layout when shuffling; the rank otherwise."""
    if not shuffle or not local_world_size or world_size % local_world_size:
        return rank
    nodes = world_size // local_world_size
    return rank // local_world_size + nodes * (rank % local_world_size)


def shard(items, seed, epoch, rank, world_size, local_world_size=0, drop_last=False,
          shuffle=True):
    """Rank's items of the epoch, in split order."""
    order = epoch_order(items, seed, epoch, shuffle)
    n = len(order)
    size = n // world_size if drop_last else -(-n // world_size)
    return [order[p % n] for p in range(slot(rank, world_size, local_world_size, shuffle),
                                         size * world_size, world_size)]
