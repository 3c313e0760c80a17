"""The job's own Python after galleyd's part: a transform cut at its first op
galleyd does not know, the rest run in the job (in the main process or in
worker processes), torch's collate_fn and default_collate, torchvision
dataset objects, and the errors a user's code meets."""

import os
import signal

import numpy as np
import PIL
import pytest
import torch
import torchvision
from torch.utils.data import DistributedSampler, default_collate
from torchvision import transforms as TV

import galley
from galley import python_stage
from galley import transforms as T

# torchvision parity, DataLoader semantics and tensors: also under the oldest torch.
pytestmark = pytest.mark.compat

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
# galley's pixels equal Pillow 9's (Debian's); a newer Pillow wheel decodes
# JPEGs with its own libjpeg-turbo, a level apart at most before the ops
# (tests/python/test_transforms_parity.py).
LEVELS = 0.0 if PIL.__version__.startswith("9.") else 3.0


def eval_preset(crop, resize):
    """torchvision's references/classification ClassificationPresetEval."""
    return [TV.Resize(resize), TV.CenterCrop(crop), TV.PILToTensor(),
            TV.ConvertImageDtype(torch.float), TV.Normalize(MEAN, STD)]


def train_preset(crop):
    """torchvision's references/classification ClassificationPresetTrain
    (no auto-augment, no erasing)."""
    return [TV.RandomResizedCrop(crop), TV.RandomHorizontalFlip(0.5), TV.PILToTensor(),
            TV.ConvertImageDtype(torch.float), TV.Normalize(MEAN, STD)]


def add_noise(x):
    """The user's op: Gaussian noise on the normalised tensor, from torch's
    global generator."""
    return x + 0.1 * torch.randn_like(x)


def by_id(loader):
    out = {}
    for images, labels, ids in loader.iter_with_ids():
        for image, label, item in zip(images, labels, ids.tolist()):
            assert item not in out, "an item came twice in one epoch"
            out[item] = (image.clone(), int(label))
    return out


def test_the_transform_is_cut_at_the_first_op_galleyd_does_not_know():
    split = python_stage.split_transform(TV.Compose(train_preset(32) + [TV.Lambda(add_noise)]))
    assert [type(op).__name__ for op in split.prefix] == [
        "RandomResizedCrop", "RandomHorizontalFlip", "PILToTensor", "ConvertImageDtype",
        "Normalize"]
    assert [type(op).__name__ for op in split.tail] == ["Lambda"]
    assert split.tensor_input
    pil = python_stage.split_transform([TV.Resize(40), TV.CenterCrop(32), add_noise,
                                        TV.PILToTensor()])
    assert len(pil.prefix) == 2 and pil.tail[0] is add_noise and not pil.tensor_input
    # A known op galleyd cannot run with its arguments goes to the job too.
    assert python_stage.split_transform(
        [TV.CenterCrop(8), TV.Grayscale(1)]).tail[0].__class__.__name__ == "Grayscale"
    with pytest.raises(ValueError, match=r"galley.transforms.CenterCrop comes after.*torchvision"):
        python_stage.split_transform([TV.Lambda(add_noise), T.CenterCrop(8)])


@pytest.mark.parametrize("workers", [0, 2])
def test_reference_eval_preset_with_a_lambda_equals_torch(daemon, folder, workers):
    pipeline = TV.Compose(eval_preset(32, 40) + [TV.Lambda(lambda x: x * 2 + 1)])
    reference = torchvision.datasets.ImageFolder(str(folder), transform=pipeline)
    loader = galley.DataLoader(folder, batch_size=7, transform=pipeline, num_workers=workers,
                               socket=daemon.socket, epochs=1)
    assert loader.transform_split.endswith("the job: Lambda")
    got = by_id(loader)
    assert sorted(got) == list(range(len(reference)))
    for item, (image, label) in got.items():
        expected, expected_label = reference[item]
        assert label == expected_label and image.shape == expected.shape
        assert float((image - expected).abs().max()) <= LEVELS / 255 / 0.224 * 2 + 1e-5
    loader.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_a_python_op_on_the_pil_image_before_to_tensor_equals_torch(daemon, folder, workers):
    pipeline = TV.Compose([TV.Resize(40), TV.CenterCrop(32),
                           TV.Lambda(lambda image: image.transpose(PIL.Image.ROTATE_90)),
                           TV.PILToTensor()])
    reference = torchvision.datasets.ImageFolder(str(folder), transform=pipeline)
    loader = galley.DataLoader(folder, batch_size=16, transform=pipeline, num_workers=workers,
                               socket=daemon.socket, epochs=1)
    for item, (image, label) in by_id(loader).items():
        expected, expected_label = reference[item]
        assert image.dtype == torch.uint8 and label == expected_label
        assert float((image.double() - expected.double()).abs().max()) <= LEVELS
    loader.close()


def test_reference_train_preset_with_noise_has_torchs_distribution(daemon, folder):
    """Random ops: the per-sample statistics of galley's and torch's outputs
    over several epochs come from one distribution (two-sample
    Kolmogorov-Smirnov), and the noise the job's op adds is N(0, 0.1)."""
    pipeline = TV.Compose(train_preset(32) + [TV.Lambda(add_noise)])
    reference = torchvision.datasets.ImageFolder(str(folder), transform=pipeline)
    torch.manual_seed(0)
    theirs = [reference[i][0] for _ in range(8) for i in range(len(reference))]
    loader = galley.DataLoader(folder, batch_size=20, shuffle=True, transform=pipeline,
                               num_workers=2, socket=daemon.socket, epochs=8)
    ours = [image.clone() for _ in range(8) for images, _labels in loader for image in images]
    loader.close()
    assert len(ours) == len(theirs) == 8 * 60

    def ks(a, b):
        a, b = np.sort(a), np.sort(b)
        grid = np.concatenate([a, b])
        return np.abs(np.searchsorted(a, grid, "right") / len(a)
                      - np.searchsorted(b, grid, "right") / len(b)).max()

    n = len(ours)
    critical = 1.95 * np.sqrt(2 / n)  # alpha = 0.001
    for name, statistic in (("mean", lambda x: float(x.mean())),
                            ("std", lambda x: float(x.std())),
                            ("left-right", lambda x: float((x[..., :8] - x[..., -8:]).mean()))):
        d = ks([statistic(x) for x in ours], [statistic(x) for x in theirs])
        assert d < critical, f"{name}: KS distance {d:.3f} >= {critical:.3f}"
    # The noise alone: galleyd's draws are a function of (seed, epoch, item),
    # so the same loader without the job's op gives the same crops.
    plain = galley.DataLoader(folder, batch_size=20, shuffle=True,
                              transform=TV.Compose(train_preset(32)), socket=daemon.socket,
                              epochs=1)
    noisy = galley.DataLoader(folder, batch_size=20, shuffle=True, transform=pipeline,
                              socket=daemon.socket, epochs=1)
    noise = torch.cat([(a - b).flatten() for (a, _, _), (b, _, _)
                       in zip(noisy.iter_with_ids(), plain.iter_with_ids())])
    assert abs(float(noise.mean())) < 0.005 and 0.098 < float(noise.std()) < 0.102
    plain.close()
    noisy.close()


def test_a_v2_pipeline_passes_tv_tensors_to_the_job(daemon, folder):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    seen = []

    def check(image):
        seen.append(type(image).__name__)
        return image * 2

    pipeline = v2.Compose([v2.Resize([16, 16]), v2.ToImage(),
                           v2.ToDtype(torch.float32, scale=True), v2.Lambda(check)])
    loader = galley.DataLoader(folder, batch_size=8, transform=pipeline, socket=daemon.socket)
    images, _labels = next(iter(loader))
    assert images.shape == (8, 3, 16, 16) and seen == ["Image"] * 8
    assert 1.0 < float(images.max()) <= 2.0
    del images
    loader.close()


def test_python_part_is_seeded_per_sample_the_same_with_any_workers(daemon, folder):
    pipeline = TV.Compose(train_preset(24) + [TV.Lambda(add_noise)])

    def epoch(workers, seed=3):
        loader = galley.DataLoader(folder, batch_size=8, transform=pipeline, seed=seed,
                                   num_workers=workers, socket=daemon.socket, epochs=1)
        loader.set_epoch(2)
        out = by_id(loader)
        loader.close()
        return out

    zero, two, other = epoch(0), epoch(2), epoch(0, seed=4)
    assert all(torch.equal(zero[i][0], two[i][0]) for i in zero)
    assert sum(not torch.equal(zero[i][0], other[i][0]) for i in zero) > 50


@pytest.mark.parametrize("workers", [0, 2])
def test_a_transform_that_raises_names_the_item_with_its_traceback(daemon, folder, workers):
    def users_bug(image):
        raise KeyError("the user's bug")

    loader = galley.DataLoader(folder, batch_size=8, transform=[TV.Resize([16, 16]), users_bug],
                               num_workers=workers, socket=daemon.socket)
    path = torchvision.datasets.ImageFolder(str(folder)).samples[0][0]  # the first item's
    with pytest.raises(KeyError, match=r"(?s)Caught KeyError in the transform of item 0 "
                                       rf"\({path}\).*Original Traceback.*users_bug.*"
                                       r"the user's bug"):
        for _ in loader:
            pass
    loader.close()


def test_a_killed_worker_raises_instead_of_hanging(daemon, folder):
    main = os.getpid()

    def killed_in_a_worker(x):
        if os.getpid() != main:
            os.kill(os.getpid(), signal.SIGKILL)
        return x

    loader = galley.DataLoader(folder, batch_size=8, num_workers=2, socket=daemon.socket,
                               transform=[TV.Resize([8, 8]), TV.PILToTensor(),
                                          TV.Lambda(killed_in_a_worker)])
    with pytest.raises(RuntimeError, match=r"worker process \d \(pid \d+\) exited unexpectedly "
                                           r"\(killed by signal SIGKILL\)"):
        for _ in loader:
            pass
    loader.close()


def test_collate_fn_receives_samples_as_torch(daemon, folder):
    fixed = T.Compose([T.Resize([8, 8])])
    seen = []

    def collate(samples):
        image, label = samples[0]
        seen.append((len(samples), tuple(image.shape), type(label)))
        return default_collate(samples)

    plain = galley.DataLoader(folder, batch_size=8, transform=fixed, socket=daemon.socket)
    given = galley.DataLoader(folder, batch_size=8, transform=fixed, collate_fn=collate,
                              socket=daemon.socket)
    for (images, labels), (c_images, c_labels) in zip(plain, given):
        assert torch.equal(images, c_images) and torch.equal(labels, c_labels)
    assert len(seen) == len(given) == 8
    assert seen[0] == (8, (3, 8, 8), torch.Tensor)
    # Also under iter_with_ids(), which adds the ids to what collate_fn gives.
    images, labels, ids = next(given.iter_with_ids())
    assert images.shape == (8, 3, 8, 8) and ids.tolist() == list(range(8))
    del images, labels, ids
    # A collate_fn written for the stacked batch: the error names the new hook.
    old = galley.DataLoader(folder, batch_size=8, transform=fixed, socket=daemon.socket,
                            collate_fn=lambda batch: (batch[0].float() / 255, batch[1]))
    with pytest.raises(AttributeError, match=r"receives a list of \(image, target\) samples.*"
                                             r"batch_transform="):
        next(iter(old))
    for loader in (plain, given, old):
        loader.close()


def test_batch_transform_takes_the_stacked_batch(daemon, folder):
    loader = galley.DataLoader(folder, batch_size=8, transform=T.Compose([T.Resize([8, 8])]),
                               socket=daemon.socket,
                               batch_transform=lambda images, labels, rng: (
                                   images.float() / 255, labels + 100))
    images, labels = next(iter(loader))
    assert images.dtype == torch.float32 and images.max() <= 1.0 and labels.min() >= 100
    loader.close()


def test_is_valid_file_and_extensions_serve_torchs_subset(daemon, folder, workdir):
    pipeline = TV.Compose([TV.Resize([8, 8]), TV.PILToTensor()])
    chosen = torchvision.datasets.ImageFolder(
        str(folder), transform=pipeline,
        is_valid_file=lambda path: int(os.path.basename(path)[:4]) % 3 == 0)
    assert 0 < len(chosen) < 60
    loader = galley.DataLoader(chosen, batch_size=6, shuffle=True, socket=daemon.socket)
    got = by_id(loader)
    assert len(got) == len(chosen)
    listing = loader.dataset if isinstance(loader.dataset, galley.datasets.ListedDataset) else None
    assert listing is None  # the object given, as torch keeps it
    paths = {path for path, _ in chosen.samples}
    full = torchvision.datasets.ImageFolder(str(folder))
    assert {full.samples[item][0] for item in got} == paths
    loader.close()
    # Files with another extension, which torch would not read either.
    mixed = workdir / "mixed_ext"
    from conftest import write_folder
    for path in write_folder(mixed, classes=2, per_class=4, sizes=(16, 16), seed=9)[::2]:
        PIL.Image.open(path).save(path.with_suffix(".png"))
    only_png = torchvision.datasets.DatasetFolder(
        str(mixed), torchvision.datasets.folder.default_loader, extensions=(".png",),
        transform=pipeline)
    loader = galley.DataLoader(only_png, batch_size=8, socket=daemon.socket, epochs=1)
    images, labels = next(iter(loader))
    assert len(images) == len(only_png) == 4
    assert labels.tolist() == only_png.targets
    del images, labels
    loader.close()
    # A DistributedSampler over the subset yields positions in it.
    sampler = DistributedSampler(chosen, num_replicas=2, rank=1, shuffle=False)
    loader = galley.DataLoader(chosen, batch_size=4, sampler=sampler, socket=daemon.socket)
    served = [full.samples[i][0] for _x, _y, ids in loader.iter_with_ids() for i in ids.tolist()]
    assert served == [chosen.samples[i][0] for i in sampler]
    loader.close()


def test_target_transform_runs_in_the_job(daemon, folder):
    reference = torchvision.datasets.ImageFolder(str(folder), transform=T.Resize([8, 8]),
                                                 target_transform=lambda y: 10 * y + 1)
    loader = galley.DataLoader(reference, batch_size=60, socket=daemon.socket)
    _images, labels, ids = next(loader.iter_with_ids())
    assert labels.tolist() == [10 * reference.samples[i][1] + 1 for i in ids.tolist()]
    loader.close()


def test_dataset_objects_galley_cannot_honour_are_refused_by_name(daemon, folder):
    class WithPaths(torchvision.datasets.ImageFolder):
        def __getitem__(self, index):
            return super().__getitem__(index) + (self.samples[index][0],)

    with pytest.raises(TypeError, match=r"WithPaths overrides __getitem__, which galley.*"
                                        r"transform="):
        galley.DataLoader(WithPaths(str(folder)), socket=daemon.socket)

    def gray_loader(path):
        return PIL.Image.open(path).convert("L")

    with pytest.raises(ValueError, match=r"loader=.*gray_loader is not run by galley"):
        galley.DataLoader(torchvision.datasets.ImageFolder(str(folder), loader=gray_loader),
                          socket=daemon.socket)

    class Squares(torch.utils.data.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, index):
            return index * index

    with pytest.raises(TypeError, match=r"a folder of class folders.*a manifest file.*tar "
                                        r"shards.*got a Squares"):
        galley.DataLoader(Squares(), socket=daemon.socket)


def test_a_resume_with_workers_yields_exactly_the_items_not_yielded(daemon, folder):
    """Batches the workers prepared but the loop did not take are not
    counted: the resumed epoch serves them."""
    def loader():
        return galley.DataLoader(folder, batch_size=8, shuffle=True, seed=5, num_workers=2,
                                 transform=[TV.Resize([8, 8]), TV.ToTensor(),
                                            TV.Lambda(add_noise)], socket=daemon.socket)

    first = loader()
    batches = first.iter_with_ids()
    seen = [i for _ in range(3) for i in next(batches)[2].tolist()]
    state = first.state_dict()
    del batches
    first.close()
    second = loader()
    second.load_state_dict(state)
    rest = [i for _x, _y, ids in second.iter_with_ids() for i in ids.tolist()]
    assert len(seen) == 24 and sorted(seen + rest) == list(range(60))
    second.close()


def test_workers_run_worker_init_fn_and_answer_get_worker_info(daemon, folder):
    def tag_with_worker(x):
        info = torch.utils.data.get_worker_info()
        return torch.full((1,), info.id * 10 + info.num_workers)

    loader = galley.DataLoader(folder, batch_size=6, num_workers=2, socket=daemon.socket,
                               transform=[TV.Resize([8, 8]), TV.Lambda(tag_with_worker)],
                               worker_init_fn=lambda worker_id: torch.manual_seed(worker_id))
    tags = sorted({int(t) for images, _labels in loader for t in images.flatten()})
    assert tags == [2, 12]  # worker 0 and worker 1 of 2, each made whole batches
    loader.close()


def test_spawned_workers_give_the_forked_workers_samples(daemon, folder):
    """multiprocessing_context= names another start method, as in torch: a
    spawned worker is given the transform and the staging slots by pickling."""
    def epoch(**workers):
        loader = galley.DataLoader(folder, batch_size=10, socket=daemon.socket, epochs=1,
                                   transform=TV.Compose(train_preset(16) + [TV.Lambda(add_noise)]),
                                   **workers)
        out = by_id(loader)
        loader.close()
        return out

    forked, spawned = epoch(num_workers=2), epoch(num_workers=2, multiprocessing_context="spawn")
    assert all(torch.equal(forked[i][0], spawned[i][0]) for i in forked)


def test_a_failing_transform_over_tar_shards_names_the_shard_member(daemon, workdir):
    from conftest import write_folder
    from test_shards import folder_samples, write_shards
    root = workdir / "stage_shard_folder"
    write_folder(root, classes=2, per_class=5, seed=4)
    shards = write_shards(workdir / "stage_shards", folder_samples(root), 2)

    def users_bug(image):
        raise ValueError("bad sample")

    loader = galley.DataLoader([str(p) for p in shards], batch_size=5, socket=daemon.socket,
                               transform=[TV.Resize([8, 8]), users_bug])
    with pytest.raises(ValueError, match=rf"(?s)item 0 \({shards[0]}:s00000.jpg\).*bad sample"):
        next(iter(loader))
    loader.close()


@pytest.mark.parametrize("persistent", [False, True])
def test_persistent_workers_serve_every_epoch(daemon, folder, persistent):
    def tag_with_pid(x):
        return torch.full((1,), os.getpid())

    loader = galley.DataLoader(folder, batch_size=10, num_workers=2, socket=daemon.socket,
                               persistent_workers=persistent,
                               transform=[TV.Resize([8, 8]), TV.Lambda(tag_with_pid)])
    epochs = [{int(t) for images, _labels in loader for t in images.flatten()} for _ in range(2)]
    assert all(len(pids) == 2 for pids in epochs)
    assert (epochs[0] == epochs[1]) == persistent
    loader.close()
