// The galley client: connect to the node's galleyd, open jobs, take batches.
//
// Client is a handle to the daemon's control socket, used for opening jobs
// and for queries; it is safe to share between threads. A Job is one stream
// of batches with its own connection (its lifetime is the job's: closing it,
// or the process dying, ends the job in the daemon). Job::Next must be
// called from one thread at a time; batches may be released from any thread.
// No exceptions cross this API: failures are Status values.
#ifndef GALLEY_CLIENT_H_
#define GALLEY_CLIENT_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "galley/batch.h"
#include "galley/job_spec.h"
#include "galley/status.h"

namespace galley {

// The socket of the user's own galleyd: $XDG_RUNTIME_DIR/galley/galleyd.sock,
// or, where XDG_RUNTIME_DIR is unset, ${TMPDIR:-/tmp}/galley-<uid>/galleyd.sock.
std::string UserSocketPath();

// The node-wide service's socket: /run/galley/galleyd.sock.
std::string SystemSocketPath();

// $GALLEY_SOCKET if set; else the user's socket if it exists; else the
// system socket if it exists; else the user's socket when XDG_RUNTIME_DIR is
// set, the system socket otherwise.
std::string DefaultSocketPath();

// The uid the node's galleyd service runs as: $GALLEY_SERVICE_USER (a user
// name or a numeric uid) when set; else the owner of the system socket's
// folder (/run/galley) when only root can have made it (its parent belongs
// to root and no one else may write there); else none. A folder only root
// can create names the user root chose for the service, which needs no
// setting on a node installed with the package (its unit makes the folder).
std::optional<uid_t> ServiceUid();

// Checks the folder of a socket path the user owns by convention (the
// user's own socket): it must be a directory, not a symlink, belong to the
// calling user and have mode 0700 or narrower, since whoever may write to
// it can put a daemon of their own at the path. PermissionDenied names the
// folder, its owner or mode, and what to do. A missing folder passes: there
// is nothing there to talk to.
Status CheckUserSocketFolder(const std::string& socket_path);

struct ClientOptions {
  std::string socket_path = DefaultSocketPath();
  // How long handshakes and control requests may take.
  std::chrono::milliseconds request_timeout{10000};
  // Name this client reports to the daemon (shown by galleyctl).
  std::string client_name = "galley-cpp";
  // Whose daemon this client talks to. On every connection, before it sends
  // anything, the client asks the kernel which uid serves the socket
  // (SO_PEERCRED) and refuses with PermissionDenied any but its own, root,
  // and this one (default: ServiceUid(); nullopt trusts no one else). On the
  // user's own socket path (UserSocketPath()) it also checks the folder
  // first (CheckUserSocketFolder). So a daemon another user runs at a path
  // this client chose, such as a squatted /tmp/galley-<uid>, is told
  // nothing: not the client's pid, not a dataset.
  std::optional<uid_t> service_uid = ServiceUid();
};

// The process serving a client's socket, as the kernel reported it for the
// client's checked connection (SO_PEERCRED), never as the daemon describes
// itself.
struct DaemonProcess {
  pid_t pid = 0;
  uid_t uid = 0;
};

// What the daemon told the client about an opened job.
struct JobInfo {
  uint64_t job_id = 0;
  uint64_t dataset_size = 0;  // items in the whole dataset
  uint64_t subset_size = 0;   // items this job selected
  uint64_t epoch_size = 0;    // items this rank receives per epoch
  uint64_t batches_per_epoch = 0;
  std::vector<std::string> classes;
  std::vector<int64_t> sample_shape;  // [C, H, W] or [H, W, C]
  DType dtype = DType::kUInt8;
  Layout layout = Layout::kNCHW;
  uint32_t slots = 0;
  uint64_t segment_bytes = 0;
  // What a saved loader state names the dataset by, the same for a copy of
  // it under another path (docs/protocol.md §1.5): the listing's names,
  // sizes and labels, and apart its modification times, 32 hex digits each.
  std::string content_key;
  std::string mtimes_key;
  uint64_t dataset_bytes = 0;  // the items' total size, as listed
  // The fields each sample carries (JobSpec::fields), as the job asked,
  // less the image column with JobSpec::image_in_fields.
  std::vector<std::string> fields;
  // Tar shards: the samples the listing left out (no image, no usable
  // label, a member `fields` names missing or twice), and the first
  // of them (at most 1,000), "shard: key (why)".
  uint64_t left_out = 0;
  std::vector<std::string> left_out_samples;
  // Per field the job named, what a batch of it collates to, decided over
  // the whole dataset: "int", "float", "bool" or "" (by its values). Empty
  // when every one is "".
  std::vector<std::string> field_collations;
  // A manifest with a header row read for a job naming fields: the column
  // naming the images (JobSpec::image_key, or the first); "" otherwise.
  std::string image_key;
};

class Job {
 public:
  Job(Job&&) noexcept;
  Job& operator=(Job&&) noexcept;
  ~Job();  // closes the job

  const JobInfo& info() const;

  // Waits for the next published batch, at most `timeout`. Batches of an
  // epoch left by SeekEpoch are dropped here. Errors: DeadlineExceeded,
  // EndOfStream after the last epoch, Unavailable if the daemon went away,
  // Cancelled if it ended the job (reason in the message), DataLoss once
  // the batches published before are taken when it ended the job because
  // an epoch could not be delivered whole (the dataset changed under it, or
  // failed samples had no substitute; the message names how many and the
  // first file).
  Result<Batch> Next(std::chrono::milliseconds timeout = std::chrono::milliseconds(60000));

  // Drops whatever the daemon prepared beyond this point and restarts
  // production at the beginning of `epoch`.
  Status SeekEpoch(uint64_t epoch);
  // The same for a job opened with JobSpec::epoch_items: `items` is the
  // epoch's list, of the job's epoch length. The daemon prepares nothing of
  // an epoch before its list arrives this way.
  Status SeekEpoch(uint64_t epoch, const std::vector<uint64_t>& items);

  // The daemon's counters for this job (JSON text).
  Result<std::string> Stats();

  // Sends galleyd the job's re-resolved S3 access (temporary credentials
  // renewed while the job runs). galleyd HEADs every shard of the job's set
  // with them, as at a job's open, and only then signs the set's reads with
  // them; refused, the job keeps the ones it had. Nothing is answered: the
  // job's `credential_refreshes` and `credential_refreshes_refused` counters
  // (Stats) say which. Any thread, without waiting for a Next() in another.
  Status RefreshCredentials(const ObjectStoreAccess& access);

  // Ends the job now. Batches still held stay readable until released. May
  // be called from any thread: a Next() waiting in another returns Cancelled,
  // as does every call after it.
  void Close();

 private:
  friend class Client;
  explicit Job(std::shared_ptr<internal::JobChannel> channel);
  std::shared_ptr<internal::JobChannel> channel_;
};

class Client {
 public:
  // Connects, checks the daemon (ClientOptions::service_uid) and performs
  // the hello/welcome handshake. PermissionDenied for a daemon this client
  // does not trust, naming it, its owner and the path.
  static Result<Client> Connect(const ClientOptions& options = {});

  // Opens a job on its own connection. InvalidArgument for a bad spec,
  // NotFound / PermissionDenied for a dataset that cannot be served,
  // ResourceExhausted when the daemon's job or memory limits are reached.
  Result<Job> OpenJob(const JobSpec& spec) const;

  // Daemon-wide information for operators: "status", "datasets", "jobs",
  // "cache", "plan". Returns a JSON document. A user who is not an admin
  // of the daemon sees only their own jobs and the datasets they may read.
  Result<std::string> Query(const std::string& what) const;

  // One page of the listing of the dataset `spec` names (its dataset, or
  // shards with their image_key and label_key; the rest is ignored), from
  // item `begin` on and of at most `count` items (0: the dataset's figures
  // only), without opening a job: a JSON document with the item names and
  // labels and the dataset's size, classes and resume key (docs/protocol.md
  // §1.6). The daemon checks access as for a job over the whole dataset.
  Result<std::string> Listing(const JobSpec& spec, uint64_t begin,
                              uint64_t count = UINT64_MAX) const;

  // Control requests. Cancel: ends one of your jobs (any job, for an
  // admin); NotFound otherwise. Drain (admins): no new jobs, and galleyd
  // exits once the running ones end. Forget: drops the daemon's listing of
  // a dataset (a root or shard path) so the next job lists it afresh; for
  // an admin, the owner of the dataset's root, or a user with a job open on
  // it (PermissionDenied for another user who may read it, NotFound for
  // one who may not).
  Status Cancel(uint64_t job_id) const;
  Status Drain() const;
  Status Forget(const std::string& dataset) const;

  const ClientOptions& options() const { return options_; }
  // The daemon Connect checked. Each request connects afresh, and each
  // connection is checked the same way before anything is sent on it.
  const DaemonProcess& daemon() const { return daemon_; }

 private:
  Client(ClientOptions options, DaemonProcess daemon)
      : options_(std::move(options)), daemon_(daemon) {}
  ClientOptions options_;
  DaemonProcess daemon_;
};

}  // namespace galley

#endif  // GALLEY_CLIENT_H_
