"""galley._config alone: DataLoader's arguments checked into a LoaderConfig,
with no daemon anywhere (GALLEY_AUTOSTART=0 and no socket: a check that
reached for one would fail differently). Each refusal names the argument
and what to do; the same messages come from DataLoader itself."""

import dataclasses
import inspect
import warnings

import pytest
import torch
from torch.utils.data import DistributedSampler, RandomSampler, SequentialSampler
from torchvision import transforms as TV

import galley
from galley import _config
from galley import transforms as T
from galley._config import ARGUMENT_DEFAULTS, LoaderConfig

pytestmark = pytest.mark.compat

FIXED = T.Compose([T.Resize(16), T.CenterCrop(16)])


def same(image):
    return image


# A transform galleyd runs up to the user's own function, which runs in the job.
WITH_TAIL = TV.Compose([TV.Resize(16), TV.CenterCrop(16), same])


def test_the_defaults_are_dataloaders_signature():
    signature = inspect.signature(galley.DataLoader.__init__)
    given = {name: p.default for name, p in signature.parameters.items()
             if name not in ("self", "dataset")}
    assert given == dict(ARGUMENT_DEFAULTS)


def test_an_unknown_argument_is_a_type_error(tiny_folder):
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        LoaderConfig.build(str(tiny_folder), batchsize=4)


REFUSED = [
    (dict(on_error="ignore"), ValueError, 'on_error must be "skip" or "raise"'),
    (dict(batch_size=None), ValueError, r"batch_size=None \(torch's unbatched mode"),
    (dict(batch_size=0), ValueError, "batch_size must be at least 1"),
    (dict(ods_fraction=1.5), ValueError, r"ods_fraction must lie in \[0, 1\]"),
    (dict(max_resolution=15), ValueError, r"max_resolution must lie in \[16, 65535\]"),
    (dict(max_resolution=65536), ValueError, r"max_resolution must lie in \[16, 65535\]"),
    (dict(max_resolution=True), TypeError, "max_resolution must be an int"),
    (dict(max_resolution=256.0), TypeError, "max_resolution must be an int"),
    (dict(epochs=0), ValueError, r"epochs must be None \(endless\) or at least 1"),
    (dict(batch_sampler=[[0, 1]]), ValueError, "takes no batch_sampler"),
    (dict(timeout=-1), ValueError, "timeout option should be non-negative"),
    (dict(num_workers=-1), ValueError, "num_workers option should be non-negative"),
    (dict(policy="DSA", shuffle=True), ValueError, r"unknown policy='DSA'; galley's sampling"),
    (dict(policy="lockstep"), ValueError, "needs shuffle=True"),
    (dict(world_size=2), ValueError, r"world_size > 1 needs rank="),
    (dict(rank=2, world_size=2), ValueError, r"rank must lie in \[0, world_size\)"),
    (dict(shard_seed=-1), ValueError, r"shard_seed must lie in \[0, 2\*\*64\)"),
    (dict(rank=0, world_size=4, local_world_size=3), ValueError,
     "local_world_size=3 must divide world_size=4"),
    (dict(local_world_size=0), ValueError, "local_world_size must be a positive int"),
    (dict(prefetch=2, prefetch_factor=2), ValueError, "give prefetch= or prefetch_factor="),
    (dict(prefetch_factor=0), ValueError, "prefetch_factor must be at least 1"),
    (dict(image_key="png"), ValueError, "image_key= and label_key= apply to tar shard"),
    (dict(transform=WITH_TAIL, normalize=([0.5] * 3, [0.2] * 3)), ValueError,
     "normalize= normalises galleyd's output"),
    (dict(transform=WITH_TAIL, layout="NHWC"), ValueError,
     "layout= sets the layout of galleyd's batches"),
    (dict(fields=("jpg", "txt")), ValueError, "fields= needs tar shards or a manifest"),
]


@pytest.mark.parametrize("kwargs,error,message", REFUSED,
                         ids=[",".join(sorted(k)) + f"-{i}" for i, (k, _e, _m) in
                              enumerate(REFUSED)])
def test_each_refusal_names_the_argument_as_dataloader_does(tiny_folder, kwargs, error,
                                                              message):
    with pytest.raises(error, match=message):
        LoaderConfig.build(str(tiny_folder), **kwargs)
    with pytest.raises(error, match=message):
        galley.DataLoader(str(tiny_folder), **kwargs)


def test_the_first_argument_wrong_is_the_one_named(tiny_folder):
    # on_error is checked before batch_size, batch_size before the sampler.
    with pytest.raises(ValueError, match="on_error"):
        LoaderConfig.build(str(tiny_folder), on_error="x", batch_size=0)
    with pytest.raises(ValueError, match="batch_size must be"):
        LoaderConfig.build(str(tiny_folder), batch_size=0, sampler=object(), shuffle=True)


def test_samplers_are_checked_against_the_other_arguments(tiny_folder):
    items = list(range(12))
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        LoaderConfig.build(str(tiny_folder), sampler=SequentialSampler(items), shuffle=True)
    with pytest.raises(ValueError, match="with replacement or num_samples"):
        LoaderConfig.build(str(tiny_folder), sampler=RandomSampler(items, replacement=True))
    ddp = DistributedSampler(items, num_replicas=2, rank=1, seed=5)
    with pytest.raises(ValueError, match="seed=4 disagrees with the DistributedSampler's seed 5"):
        LoaderConfig.build(str(tiny_folder), sampler=ddp, seed=4)
    with pytest.raises(ValueError, match="policy= applies to galley's own order"):
        LoaderConfig.build(str(tiny_folder), sampler=ddp, policy="dsa")
    with pytest.raises(ValueError, match="a DistributedSampler's seed is its split's seed"):
        LoaderConfig.build(str(tiny_folder), sampler=ddp, shard_seed=1)
    with pytest.raises(ValueError, match="cannot run a BatchSampler"):
        LoaderConfig.build(str(tiny_folder), sampler=torch.utils.data.BatchSampler(
            items, 2, False))


def test_an_image_file_is_not_a_dataset(tiny_folder):
    image = next(tiny_folder.glob("*/*.jpg"))
    with pytest.raises(ValueError, match="is an image file, not a dataset"):
        LoaderConfig.build(str(image))


def test_a_config_holds_what_the_arguments_mean(tiny_folder):
    generator = torch.Generator()
    generator.manual_seed(77)
    with warnings.catch_warnings():  # num_workers has no effect here, and says so
        warnings.simplefilter("ignore")
        config = LoaderConfig.build(tiny_folder, batch_size=3, num_workers=2,
                                    prefetch_factor=3, generator=generator, transform=FIXED,
                                    drop_last=True, rank=1, world_size=3, epochs=2)
    assert config.root == str(tiny_folder) and config.dataset == tiny_folder
    assert (config.batch_size, config.seed, config.shard_seed) == (3, 77, 77)
    assert (config.prefetch, config.prefetch_factor) == (6, 3)  # factor x workers
    assert (config.rank, config.world_size, config.epochs) == (1, 3, 2)
    assert config.stage is None and not config.runs_in_workers and not config.listed
    assert config.request_seconds == _config.REQUEST_SECONDS
    spec = config.spec
    assert spec["dataset"] == str(tiny_folder) and spec["shard_drop_last"] is True
    assert spec["shuffle"] is False and spec["policy"] == "" and spec["prefetch"] == 6
    # Sent only when set: a job that sets none is the same request to any galleyd.
    for key in ("shard_seed", "local_world_size", "max_resolution"):
        assert key not in spec
    with_them = LoaderConfig.build(tiny_folder, rank=1, world_size=4, shard_seed=9,
                                   local_world_size=2, max_resolution=64)
    assert (with_them.spec["shard_seed"], with_them.spec["local_world_size"],
            with_them.spec["max_resolution"]) == (9, 2, 64)


def test_a_python_part_runs_in_workers_and_takes_pil_images(tiny_folder):
    config = LoaderConfig.build(tiny_folder, transform=WITH_TAIL, num_workers=2)
    assert config.runs_in_workers and config.stage is not None
    assert config.transform_split == "galleyd: Resize, CenterCrop; the job: same"
    assert config.spec["transform"]["output"]["layout"] == "NHWC"  # a PIL image is made from HWC


def test_a_meaningless_argument_warns_once_at_the_callers_line(tiny_folder):
    galley.loader._WARNED.discard("persistent_workers")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        LoaderConfig.build(tiny_folder, transform=FIXED, persistent_workers=True)
        LoaderConfig.build(tiny_folder, transform=FIXED, persistent_workers=True)
    ours = [w for w in caught if "persistent_workers has no effect" in str(w.message)]
    assert len(ours) == 1 and ours[0].filename == __file__


def test_a_config_is_immutable(tiny_folder):
    config = LoaderConfig.build(tiny_folder)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.batch_size = 4
    with pytest.raises(TypeError):
        config.spec["batch_size"] = 4


def test_a_loaders_arguments_cannot_be_reassigned(tiny_folder):
    loader = galley.DataLoader(tiny_folder, batch_size=2)
    assert loader.batch_size == 2 and loader._config.batch_size == 2
    with pytest.raises(AttributeError, match=r"galley.DataLoader.batch_size is fixed when the "
                                             r"loader is built; build another DataLoader with "
                                             r"batch_size=4"):
        loader.batch_size = 4
    assert loader.batch_size == 2
    # torch raises ValueError for the attributes it fixes; code that catches
    # it catches galley's too.
    for name, value in (("batch_size", 4), ("drop_last", True), ("sampler", None)):
        with pytest.raises(ValueError, match=f"galley.DataLoader.{name} is fixed"):
            setattr(loader, name, value)


def test_bounds_galleyd_defines_come_from_the_extension():
    assert _config.MAX_RESOLUTION_RANGE == tuple(galley._galley.max_resolution_range) \
        == (16, 65535)
    low, high = _config.MAX_RESOLUTION_RANGE
    assert _config.check_max_resolution(low) == low and _config.check_max_resolution(high) == high
    assert _config.check_max_resolution(None) is None
