"""torch.utils.data.DataLoader's arguments: each is honoured, refused at
construction with a message saying what to do, or accepted with a one-time
warning where it means nothing here. torchvision ImageFolder objects and
relative dataset paths."""

import os
import pathlib
import warnings

import numpy as np
import pytest
import torch
import torchvision
from torch.utils.data import (DistributedSampler, RandomSampler, SequentialSampler,
                              SubsetRandomSampler, WeightedRandomSampler)

import galley
from galley import loader as loader_module
from galley import transforms as T

pytestmark = pytest.mark.compat

FIXED = T.Compose([T.Resize([8, 8])])


def ids_of(loader):
    return [i for _x, _y, ids in loader.iter_with_ids() for i in ids.tolist()]


@pytest.mark.parametrize("kwargs,name", [
    (dict(num_workers=4), "num_workers"),
    (dict(worker_init_fn=lambda worker: None), "worker_init_fn"),
    (dict(multiprocessing_context="spawn"), "multiprocessing_context"),
    (dict(persistent_workers=True), "persistent_workers"),
    (dict(in_order=False), "in_order"),
])
def test_meaningless_arguments_warn_once(daemon, folder, kwargs, name):
    loader_module._WARNED.discard(name)
    with pytest.warns(UserWarning, match=name):
        galley.DataLoader(folder, transform=FIXED, socket=daemon.socket, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        galley.DataLoader(folder, transform=FIXED, socket=daemon.socket, **kwargs)


@pytest.mark.parametrize("kwargs,match", [
    (dict(batch_sampler=[[0, 1]]), "batch_size= and drop_last="),
    (dict(sampler=WeightedRandomSampler([1.0] * 60, 60)), "WeightedRandomSampler"),
    (dict(sampler=RandomSampler(range(60), replacement=True)), "replacement"),
    (dict(sampler=SequentialSampler(range(60)), shuffle=True), "mutually exclusive"),
    (dict(prefetch=2, prefetch_factor=2), "not both"),
    (dict(timeout=-1), "non-negative"),
    (dict(world_size=2), "rank="),
    (dict(batch_size=None), "unbatched mode.*batch_size=1"),
])
def test_unsupported_arguments_are_refused_at_construction(daemon, folder, kwargs, match):
    with pytest.raises(ValueError, match=match):
        galley.DataLoader(folder, transform=FIXED, socket=daemon.socket, **kwargs)


def test_samplers_and_generator_set_the_order(daemon, folder):
    def order(**kwargs):
        loader = galley.DataLoader(folder, batch_size=8, transform=FIXED, socket=daemon.socket,
                                   **kwargs)
        result = ids_of(loader)
        loader.close()
        return result

    assert order(sampler=SequentialSampler(range(60))) == list(range(60))
    seeded = order(shuffle=True, seed=5)
    assert order(shuffle=True, generator=torch.Generator().manual_seed(5)) == seeded
    assert order(sampler=RandomSampler(range(60),
                                       generator=torch.Generator().manual_seed(5))) == seeded
    subset = order(sampler=SubsetRandomSampler([3, 9, 12, 40]))
    assert sorted(subset) == [3, 9, 12, 40]
    ddp = order(sampler=DistributedSampler(range(60), num_replicas=3, rank=2, shuffle=False))
    assert ddp == list(range(2, 60, 3))


def test_prefetch_factor(daemon, folder):
    loader = galley.DataLoader(folder, batch_size=8, transform=FIXED, socket=daemon.socket,
                               prefetch_factor=3)
    assert loader.prefetch == 3
    assert loader.info["slots"] == 3 + 1  # prefetch batches beside the one in hand
    images, labels = next(iter(loader))
    assert images.shape == (8, 3, 8, 8) and labels.shape == (8,)
    del images, labels
    loader.close()


def test_imagefolder_object_and_relative_paths(daemon, folder, workdir, monkeypatch):
    reference = torchvision.datasets.ImageFolder(str(folder), transform=FIXED)
    loader = galley.DataLoader(reference, batch_size=60, socket=daemon.socket)
    assert loader.dataset is reference  # what was given, as torch keeps it
    assert loader.transform is FIXED  # the ImageFolder's transform, none given
    images, labels = next(iter(loader))
    assert images.shape == (60, 3, 8, 8)
    assert labels.tolist() == [label for _path, label in reference.samples]
    del images, labels
    loader.close()
    with pytest.raises(TypeError, match="root path"):
        galley.DataLoader(list(range(10)), transform=FIXED, socket=daemon.socket)
    # A relative root is the client's, not the daemon's working directory.
    monkeypatch.chdir(folder.parent)
    relative = galley.DataLoader(folder.name, batch_size=60, transform=FIXED,
                                 socket=daemon.socket)
    assert relative.dataset.root == str(folder)
    assert len(relative) == 1
    relative.close()


def test_transform_none_gives_native_size_or_a_clear_error(daemon, workdir):
    from conftest import write_folder
    same = workdir / "same_size"
    write_folder(same, classes=2, per_class=3, sizes=(24, 24), seed=2)  # all 24 x 24
    loader = galley.DataLoader(same, batch_size=6, socket=daemon.socket)
    images, labels = next(iter(loader))
    assert images.shape == (6, 3, 24, 24) and images.dtype == torch.uint8
    reference = torchvision.datasets.ImageFolder(str(same))
    for i in range(6):  # the decoded pixels themselves, as torchvision's PIL loader gives them
        expected = torch.from_numpy(np.array(reference[i][0])).permute(2, 0, 1)
        assert torch.equal(images[i], expected)
    del images, labels
    loader.close()

    mixed = workdir / "mixed_size"
    write_folder(mixed, classes=1, per_class=6, sizes=(20, 30), seed=3)
    loader = galley.DataLoader(mixed, batch_size=2, on_error="skip", socket=daemon.socket)
    with pytest.raises(ValueError, match=r"first image's size .*give a transform that resizes"):
        for _ in loader:
            pass
    loader.close()


def test_an_image_file_as_the_dataset_says_what_galley_reads(daemon, folder):
    image = next(p for p in sorted(pathlib.Path(folder).rglob("*.jpg")))
    with pytest.raises(ValueError, match=r"is an image file, not a dataset.*ImageFolder layout"):
        galley.DataLoader(str(image), transform=FIXED, socket=daemon.socket)


def test_dataset_sampler_and_workers_are_torchs(daemon, folder):
    """loader.dataset, .sampler, .batch_sampler and .num_workers read as torch's
    DataLoader over torchvision's ImageFolder reads them, for a path and for an
    ImageFolder object; the eval idiom correct / len(loader.dataset) is right."""
    reference = torchvision.datasets.ImageFolder(str(folder))
    torch_loader = torch.utils.data.DataLoader(reference, batch_size=16, num_workers=0)
    opened = daemon.query("status")["jobs_opened"]
    by_path = galley.DataLoader(str(folder), batch_size=16, transform=FIXED, socket=daemon.socket)
    assert len(by_path.dataset) == len(reference) == 60
    assert by_path.dataset.samples == reference.samples
    assert daemon.query("status")["jobs_opened"] == opened  # the listing opens no job
    by_object = galley.DataLoader(reference, batch_size=16, transform=FIXED, socket=daemon.socket)
    for loader in (by_path, by_object):
        dataset = loader.dataset
        assert len(dataset) == len(reference)
        assert dataset.classes == reference.classes
        assert dataset.class_to_idx == reference.class_to_idx
        assert dataset.samples == reference.samples and dataset.imgs == reference.imgs
        assert dataset.targets == reference.targets
        assert loader.num_workers == torch_loader.num_workers == 0
        assert len(loader.sampler) == len(torch_loader.sampler) == 60
        assert list(loader.sampler) == list(torch_loader.sampler)
        assert list(loader.batch_sampler) == list(torch_loader.batch_sampler)
        assert len(loader.batch_sampler) == len(torch_loader.batch_sampler) == len(loader) == 4
        # Item ids index the dataset's samples, and labels are theirs.
        correct = 0
        for _images, labels, ids in loader.iter_with_ids():
            assert labels.tolist() == [dataset.samples[i][1] for i in ids.tolist()]
            correct += int((labels == torch.tensor(dataset.targets)[ids]).sum())
        assert correct / len(loader.dataset) == 1.0
        loader.close()
    assert galley.DataLoader(str(folder), num_workers=3, transform=FIXED,
                             socket=daemon.socket).num_workers == 3


def test_listed_dataset_reads_every_page_of_one_listing(daemon, folder, workdir):
    """samples joins the listing's pages (here cut to 7 items each) and reads
    them again when the dataset was listed anew in between; a manifest names
    its files relative to its folder, with its class names."""
    reference = torchvision.datasets.ImageFolder(str(folder))
    loader = galley.DataLoader(str(folder), transform=FIXED, socket=daemon.socket)
    fetch, calls = loader.dataset._fetch, []

    def short_pages(begin, count):
        page = fetch(begin, count)
        calls.append(begin)
        page["names"], page["labels"] = page["names"][:7], page["labels"][:7]
        if len(calls) == 3:  # as if the files had changed: another listing
            page["content_key"] = "0" * 32
        return page

    paged = galley.datasets.ListedDataset(str(folder), short_pages)
    assert paged.samples == reference.samples
    assert calls == list(range(0, 60, 7)) * 2  # read whole twice: the first read mixed two
    manifest = workdir / "attributes_manifest.txt"
    rows = [(path, reference.classes[label]) for path, label in reference.samples[::7]]
    manifest.write_text("".join(f"{os.path.relpath(p, workdir)}\t{name}\n" for p, name in rows))
    listed = galley.DataLoader(str(manifest), transform=FIXED, socket=daemon.socket).dataset
    assert len(listed) == len(rows)
    assert listed.classes == sorted({name for _p, name in rows})
    assert listed.samples == [(p, listed.class_to_idx[name]) for p, name in rows]


def test_epoch_sampler_is_the_split_galley_serves(daemon, folder):
    """Without a sampler, loader.sampler lists this rank's items as
    DistributedSampler(shuffle=False) does, and galleyd serves exactly them;
    shuffled, it has the rank's length and says why it cannot list them."""
    reference = torchvision.datasets.ImageFolder(str(folder))
    for world, rank, drop_last in ((7, 3, False), (7, 6, False), (8, 5, True)):
        loader = galley.DataLoader(str(folder), batch_size=4, rank=rank, world_size=world,
                                   drop_last=drop_last, transform=FIXED, socket=daemon.socket)
        torch_sampler = DistributedSampler(reference, num_replicas=world, rank=rank,
                                           shuffle=False, drop_last=drop_last)
        assert list(loader.sampler) == list(torch_sampler)
        assert len(loader.sampler) == len(torch_sampler)
        assert (loader.sampler.num_replicas, loader.sampler.rank) == (world, rank)
        assert ids_of(loader)[:len(torch_sampler) // 4 * 4] == list(torch_sampler)[
            :len(torch_sampler) // 4 * 4]
        loader.close()
    shuffled = galley.DataLoader(str(folder), batch_size=4, shuffle=True, rank=1, world_size=4,
                                 transform=FIXED, socket=daemon.socket)
    assert len(shuffled.sampler) == 15 and len(shuffled.batch_sampler) == len(shuffled) == 4
    shuffled.sampler.set_epoch(3)
    assert shuffled.sampler.epoch == 3
    with pytest.raises(TypeError, match="iter_with_ids"):
        iter(shuffled.sampler)
    shuffled.close()
    given = DistributedSampler(reference, num_replicas=2, rank=0)
    assert galley.DataLoader(str(folder), sampler=given, transform=FIXED,
                             socket=daemon.socket).sampler is given
