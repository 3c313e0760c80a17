// JobSpec: what one training job asks galleyd for.
//
// A plain value; build one, hand it to Client::OpenJob. Field defaults follow
// torch.utils.data.DataLoader where there is a counterpart.
#ifndef GALLEY_JOB_SPEC_H_
#define GALLEY_JOB_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "galley/status.h"

namespace galley {

// A job's access to S3-compatible object storage, for shards named by
// s3:// URLs: resolved in the job as the AWS CLI resolves it (environment,
// shared credentials and config files; the Python package's
// galley/s3_access.py) and sent with the OpenJob request. galleyd keeps it
// with the job only (never its own environment or instance credentials),
// signs that job's requests with it, and never logs or shows it.
struct ObjectStoreAccess {
  // Scheme and authority, e.g. "http://127.0.0.1:9000"; "" = AWS's
  // regional endpoint for `region`. Must be one of galleyd's
  // allowed_s3_endpoints.
  std::string endpoint_url;
  std::string region = "us-east-1";
  // The bucket as the first path segment (addressing_style = path) rather
  // than a host name label.
  bool path_style = false;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" unless temporary
};

struct JobSpec {
  // An ImageFolder root (root/<class>/<file>) or a manifest file
  // (`relative/path<TAB>label` per line). Must lie under the daemon's allowed
  // roots.
  std::string dataset;

  // Tar shards (WebDataset layout) to serve instead of `dataset`, already
  // expanded from any glob or brace pattern by the client; `dataset` then only
  // names the set in messages. Jobs whose shards resolve to the same files,
  // with the same keys, share one dataset.
  std::vector<std::string> shards;
  // Extension of the image member of a shard sample; "" = the first of jpg,
  // jpeg, png, webp present. For a manifest with a header row, the column
  // naming the images; "" = the first.
  std::string image_key;
  // Label of a shard sample: "cls" (text integer), "json:FIELD", or ""
  // (unlabelled; labels are -1).
  std::string label_key = "cls";
  // The members of each sample a batch carries besides its image, in this
  // order: for shards a member's extension ("txt", "json", "cls", ...),
  // "__key__" (the sample's key) or "__url__" (its shard's path); for a
  // manifest with a header row, column names. Each value travels with its
  // item as bytes (wire/field_record.h); a shard's ".json" must parse as
  // JSON and its ".cls" or ".index" as an integer, or the sample fails. A
  // shard sample without one of the members is left out of the listing.
  // Empty: the batch carries the image and the label only.
  std::vector<std::string> fields;
  // For a manifest with a header row: `fields` names the image column too,
  // where the batch has its images, and galleyd finds which column that is
  // (image_key, or the first) as it reads the manifest, for a client that
  // cannot read the manifest itself (an s3:// object). galleyd refuses a job
  // whose `fields` leaves the image column out or names nothing else, and
  // tells the image column in JobOpened (JobInfo::image_key).
  bool image_in_fields = false;
  // The largest field value a sample may carry; a larger one fails the
  // sample, naming the field.
  uint64_t max_member_bytes = uint64_t{1} << 20;
  // The bytes of field records one batch may carry (the slot's field area);
  // 0 = max(batch_size * 64 KiB, max_member_bytes). A batch whose records
  // take more ends the job with a message saying so.
  uint64_t field_batch_bytes = 0;

  // Subset of the dataset: the union of these three selections; all empty
  // means the whole dataset.
  std::vector<std::string> classes;
  std::vector<std::pair<uint64_t, uint64_t>> id_ranges;  // [begin, end)
  std::vector<uint64_t> ids;

  // Samples per batch. The last batch of an epoch is smaller unless
  // drop_last, which leaves the epoch's incomplete last batch out. Every
  // batch but that last one is full: a sample that cannot be read or decoded
  // is replaced by a substitute (see on_error), so batches_per_epoch is exact.
  uint32_t batch_size = 1;
  bool drop_last = false;

  // Transform pipeline as JSON (docs/transforms.md); it must end in a fixed
  // output size. The Python package builds it from galley.transforms.
  std::string transform_json;

  // Randomness of the order and of the augmentations. Augmentations are a
  // pure function of (seed, epoch, item id).
  uint64_t seed = 0;
  uint64_t epochs = 0;       // 0 = endless
  uint64_t start_epoch = 0;  // the first epoch to produce

  // DDP sharding, as torch's DistributedSampler: every epoch the subset (n
  // items) is permuted from (shard_seed, epoch) alone (identity when
  // !shuffle), padded by wrapping around to ceil(n / world_size) * world_size
  // positions (or cut to floor(n / world_size) * world_size with
  // shard_drop_last), and each rank keeps every world_size-th position from
  // its own. Every rank gets the same number of items, hence of batches;
  // shards are disjoint apart from the padding. The split does not depend on
  // the daemon, so ranks served by different daemons agree.
  uint32_t rank = 0;
  uint32_t world_size = 1;
  bool shard_drop_last = false;
  // The split's seed when it should not be `seed`: DDP jobs with the same
  // shard_seed, world size and nodes load the same items on each node in an
  // epoch (node-affine shards, docs/sampling.md §9), so the node's daemon
  // reads and decodes them once for all of them, while their own seeds still
  // decide augmentations. Unset: `seed`, as DistributedSampler.
  std::optional<uint64_t> shard_seed;
  // Ranks per node (torchrun's LOCAL_WORLD_SIZE), ranks numbered node by node
  // (node rank = rank / local_world_size, as torchrun numbers them); must
  // divide world_size. 0 = not known. Known, it makes the slots node-major,
  // so that jobs on the same nodes share each node's items even with
  // different numbers of ranks per node; with one node or one rank per node
  // it changes nothing.
  uint32_t local_world_size = 0;

  // Batch slots in the job's shared-memory ring: how far the daemon may run
  // ahead of the consumer. More slots smooth stalls and cost memory.
  uint32_t prefetch = 4;

  // What a sample that cannot be read or decoded does: "skip" (a substitute
  // takes its place and the failure is counted) or "raise" (the batch
  // reports the failure and the client raises). Either way a batch that
  // cannot be completed, because the dataset changed under the job or no
  // substitute is left, ends the job (Job::Next returns DataLoss).
  std::string on_error = "skip";

  // Sampling policy: "" (the daemon's default, dsa) or a random-order name
  // of galley/sampling_policies.h: "dsa", "dsa-chain", "independent",
  // "lockstep", "ods".
  std::string policy;

  // Only with policy "ods": the most of the job's draws the daemon may
  // replace, each epoch, by items it already has cached, as a fraction of the
  // epoch's size in [0, 1]. Higher values buy more cache hits with a larger
  // bias of the order toward cached items; 0 makes "ods" act as "dsa".
  double ods_fraction = 0.1;

  // Free-form name shown by galleyctl and in metrics.
  std::string name;

  // Order within an epoch. true: random, decided by the sampling policy (a
  // pure function of (seed, epoch) while no other job shares the job's items;
  // docs/sampling.md). false: sequential, the items in id order (with DDP the
  // shard in split order, as DistributedSampler(shuffle=False)); such jobs use
  // the "sequential" policy, so evaluation jobs over one dataset that run
  // together still share reads and decodes.
  bool shuffle = true;

  // Mid-epoch resume: start_epoch begins at batch start_batch and leaves out
  // the items in resume_consumed (those the job consumed before it stopped).
  // A later epoch, or start_epoch again after SeekEpoch, is whole.
  uint64_t start_batch = 0;
  std::vector<uint64_t> resume_consumed;

  // The images pass at their own size (torch with transform=None): the
  // daemon takes the size of the subset's first image, and a sample of
  // another size fails with a message naming both sizes (the client raises).
  // The transform must then resize nothing.
  bool native_size = false;

  // The items of each epoch as the client lists them, instead of the
  // daemon's subset and DDP split: what torch's DistributedSampler (or any
  // sampler) yields for the epoch, an item listed twice served twice. Set,
  // the subset fields and resume_consumed must be empty, and rank and
  // world_size only describe the job. This is start_epoch's list from
  // position start_batch * batch_size on (a resume lists the items not
  // consumed yet); each later epoch's list comes with SeekEpoch, and the
  // daemon prepares nothing of an epoch before it has its list. Every epoch
  // has start_batch * batch_size + epoch_items->size() items, and a
  // SeekEpoch list of another length is refused. With shuffle false (the
  // sequential policy) the items come in the list's order; a random policy
  // draws the order of the distinct items, and the copies of an item listed
  // more than once come after them, in the list's order.
  std::optional<std::vector<uint64_t>> epoch_items;

  // The longest side, in pixels, an image of the dataset is kept at: galleyd
  // shrinks a larger image on first read, once, with PIL's BOX filter (an
  // antialiased area average), and its decoded tier keeps the shrunk pixels,
  // so every job sees the image at that size and the tier holds more items.
  // An image within it passes unchanged. Part of the dataset's identity: jobs
  // with different values share neither items nor cache entries. 0 = off
  // (every image at its own size, torchvision's exact path); otherwise from
  // kMinMaxResolution to kMaxMaxResolution.
  uint32_t max_resolution = 0;

  // The job's access to object storage; required when `shards` are s3://
  // URLs or globs, when `dataset` is an s3:// prefix or manifest object, or
  // when a local manifest names s3:// objects; only then.
  std::optional<ObjectStoreAccess> s3;
};

// The bounds of JobSpec::max_resolution when it is set: below 16 no crop of
// a recipe is left, and 65535 is the largest side a JPEG can have.
inline constexpr uint32_t kMinMaxResolution = 16;
inline constexpr uint32_t kMaxMaxResolution = 65535;

// The words a sample fails with under JobSpec::native_size when its size is
// not the first image's: the message is "<path>: " followed by these, the
// sizes and what to do. The Python package looks for them in a batch's error
// to raise a ValueError (a mistake in the job's arguments) rather than a
// sample failure.
inline constexpr std::string_view kNativeSizeMismatch =
    "transform=None needs every image at the first image's size";

// The most bytes one request frame may carry: an OpenJob body, whose
// epoch_items may list a few million item ids, or a SeekEpoch with an
// epoch's list. The Python package refuses a sampler whose list cannot fit.
inline constexpr uint32_t kMaxRequestBytes = 16u << 20;

// A spec from its JSON form, galleyd's OpenJob body (docs/protocol.md §1.4;
// the Python package builds its jobs this way). Strict: a field galley does
// not know, a missing required one (dataset, batch_size, transform) or a
// value of the wrong type or out of range is an InvalidArgument naming it.
Result<JobSpec> ParseJobSpec(std::string_view json_text);

// The names of that JSON form's fields, in protocol order.
std::vector<std::string> JobSpecFieldNames();

// The fields of that form that name a dataset (its path, or its shards with
// their keys and fields), which a listing request (Client::Listing) takes
// and the rest of a spec leaves unchanged; in protocol order.
std::vector<std::string> ListingFieldNames();

// The bytes of a slot's field area for `spec`: 0 without fields, else
// field_batch_bytes or its default.
uint64_t FieldAreaBytes(const JobSpec& spec);

}  // namespace galley

#endif  // GALLEY_JOB_SPEC_H_
