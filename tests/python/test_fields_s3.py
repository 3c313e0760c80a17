"""fields= with a manifest object (s3://bucket/.../table.csv), against a real
galleyd and a real `rclone serve s3`: galley's client reads no object, so
galleyd reads the header, finds the image column and checks the names. An
epoch is exactly-once with the values of the same manifest read locally,
and a wrong fields= is refused with the local manifest's message, by the
loader's first iteration rather than its construction."""

import csv
import json

import pytest

from conftest import start_daemon, stop_daemon
from test_s3_datasets import FOLDER, FOLDER_IMAGES, aws_env, s3  # noqa: F401 - fixtures

FIELDS = ("caption", "image", "idx", "score", "tags")


def table_rows():
    """One row per image of the bucket's imgs/ folder (test_s3_datasets's
    FOLDER): its key, class name, an integer, a float, a multi-label list
    and a caption with a comma and quotes."""
    rows, i = [], 0
    for folder, count in FOLDER.items():
        for n in range(count):
            rows.append({"image": f"{folder}/{n:02d}.png", "label": folder.split("/")[0],
                         "idx": i * 3, "score": i * 0.25, "tags": [i % 4, (i * 7) % 10][: 1 + i % 2],
                         "caption": f'photo {i}, "quoted"'})
            i += 1
    return rows


def write_table(path):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "label", "idx", "score", "tags", "caption"])
        for row in table_rows():
            writer.writerow([row["image"], row["label"], row["idx"], row["score"],
                             json.dumps(row["tags"]), row["caption"]])


@pytest.fixture
def tables(tmp_path):
    """table.csv beside the images in the bucket (written before rclone
    starts, which lists its folder once) and beside the local copy of them,
    and an empty manifest object."""
    for folder in (tmp_path / "s3" / "data" / "galley" / "imgs", tmp_path / "local-imgs"):
        folder.mkdir(parents=True)
        write_table(folder / "table.csv")
    (tmp_path / "s3" / "data" / "galley" / "imgs" / "empty.csv").write_text("")
    (tmp_path / "local-imgs" / "empty.csv").write_text("")
    return tmp_path / "local-imgs"


@pytest.fixture
def daemon(tmp_path, tables, s3):  # noqa: F811 - tables first: before rclone starts
    d = start_daemon(tmp_path, "--allowed-s3-endpoint", s3["url"])
    yield d
    stop_daemon(d)


def make(daemon, dataset, **kwargs):
    import galley
    from galley import transforms as T
    kwargs.setdefault("batch_size", 5)
    return galley.DataLoader(dataset, socket=daemon.socket,
                             transform=T.Compose([T.Resize(16), T.CenterCrop(16)]), **kwargs)


def epoch(loader):
    """{item id: (image, caption, idx, score, tags)} of one epoch, each id
    asserted once, and the types of the first batch's fields."""
    seen, types = {}, None
    for captions, images, idx, scores, tags, ids in loader.iter_with_ids():
        if types is None:
            types = (type(captions), idx.dtype, scores.dtype, type(tags))
        for i, item in enumerate(ids.tolist()):
            assert item not in seen
            seen[item] = (images[i].clone(), captions[i], int(idx[i]), float(scores[i]), tags[i])
    loader.close()
    return seen, types


def test_an_epoch_of_a_manifest_object_with_fields_is_exactly_once_as_read_locally(
        daemon, aws_env, tables):
    import torch
    remote, remote_types = epoch(make(daemon, "s3://galley/imgs/table.csv", fields=FIELDS,
                                      shuffle=True, seed=4, epochs=1))
    local, local_types = epoch(make(daemon, str(tables / "table.csv"), fields=FIELDS))
    rows = table_rows()
    assert sorted(remote) == list(range(FOLDER_IMAGES)) == sorted(local)
    # galleyd said how each column collates, as it does for the local file.
    assert remote_types == local_types == (list, torch.int64, torch.float64, list)
    for item, (image, caption, idx, score, tags) in remote.items():
        want = rows[item]
        assert (caption, idx, score, tags) == (want["caption"], want["idx"], want["score"],
                                               want["tags"])
        assert bool((image == local[item][0]).all())  # PNGs: the same pixels
        assert (caption, idx, score, tags) == local[item][1:]


def test_image_key_names_the_image_column_of_a_manifest_object(daemon, aws_env):
    # The loader then knows the image column without galleyd, as for a
    # local file; fields= picks and orders the columns.
    loader = make(daemon, "s3://galley/imgs/table.csv", batch_size=FOLDER_IMAGES,
                  image_key="image", fields=("idx", "image", "label"))
    idx, images, labels = next(iter(loader))
    loader.close()
    rows = table_rows()
    assert idx.tolist() == [row["idx"] for row in rows]
    assert labels == [row["label"] for row in rows]
    assert images.shape == (FOLDER_IMAGES, 3, 16, 16)


def refusal(daemon, dataset, fields, **kwargs):
    """The ValueError of a loader of `dataset` with `fields`, and whether
    it came from the construction (else from the first iteration)."""
    try:
        loader = make(daemon, dataset, fields=fields, **kwargs)
    except ValueError as error:
        return str(error), "construction"
    with pytest.raises(ValueError) as raised:
        next(iter(loader))
    loader.close()
    return str(raised.value), "iteration"


@pytest.mark.parametrize("fields, message", [
    (("label", "idx"), "fields=('label', 'idx') does not name the image manifest column 'image' "
                       "(the first column, or the one image_key= names)"),
    (("image",), "fields=('image',) names only the image; leave fields= out for (images, "
                 "labels) batches"),
    (("image", "colour"), "has no field 'colour'; its fields: label, idx, score, tags, caption"),
])
def test_a_wrong_fields_is_refused_as_for_a_local_manifest_at_the_first_iteration(
        daemon, aws_env, tables, fields, message):
    import galley
    remote, remote_when = refusal(daemon, "s3://galley/imgs/table.csv", fields)
    local, _local_when = refusal(daemon, str(tables / "table.csv"), fields)
    assert message in remote and message in local
    assert remote_when == "iteration"
    # The same words, the dataset's name aside.
    assert remote.replace("s3://galley/imgs/table.csv", "") == \
        local.replace(str(tables / "table.csv"), "")
    with pytest.raises(galley.InvalidRequest):  # galleyd's refusal, a ValueError
        next(iter(make(daemon, "s3://galley/imgs/table.csv", fields=fields)))
    # galleyd serves a right fields= of the same manifest afterwards.
    loader = make(daemon, "s3://galley/imgs/table.csv", fields=("image", "idx"),
                  batch_size=FOLDER_IMAGES)
    _images, idx = next(iter(loader))
    loader.close()
    assert idx.tolist() == [row["idx"] for row in table_rows()]


def test_an_empty_manifest_object_has_no_header_row(daemon, aws_env, tables):
    remote, when = refusal(daemon, "s3://galley/imgs/empty.csv", ("image", "label"))
    local, local_when = refusal(daemon, str(tables / "empty.csv"), ("image", "label"))
    assert remote == "s3://galley/imgs/empty.csv has no header row", remote
    assert local == f"{tables / 'empty.csv'} has no header row"
    assert (when, local_when) == ("iteration", "construction")


def test_image_key_with_fields_leaving_it_out_is_refused_at_construction(daemon, aws_env,
                                                                          tables):
    for dataset in ("s3://galley/imgs/table.csv", str(tables / "table.csv")):
        message, when = refusal(daemon, dataset, ("label", "idx"), image_key="image")
        assert when == "construction"
        assert message == ("fields=('label', 'idx') does not name the image manifest column "
                           "'image' (image_key= names it; with fields= the two must agree)")


def test_fields_over_an_object_prefix_is_refused_naming_what_it_needs(daemon, aws_env):
    message, when = refusal(daemon, "s3://galley/imgs/", ("image", "label"))
    assert when == "iteration"
    assert "needs tar shards or a manifest with a header row (.csv, .tsv or .jsonl)" in message
