// The `galley._galley` extension: binds the public C++ client
// (client/include/galley/*.h) and nothing else. A batch's tensor memory is a
// buffer-protocol object viewing the shared-memory slot; the slot is released
// when the last view of it (a torch tensor made by torch.frombuffer) is freed. Status values become
// Python exceptions with the daemon's message intact.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "galley/client.h"
#include "galley/version.h"

namespace py = pybind11;

namespace {

struct Exceptions {
  py::object base, unavailable, invalid, not_found, permission, limit, timeout, sample, cancelled,
      protocol, end_of_stream;
};
Exceptions* exceptions = nullptr;

[[noreturn]] void Raise(const galley::Status& status) {
  using galley::StatusCode;
  py::object type = exceptions->base;
  switch (status.code()) {
    case StatusCode::kUnavailable:
      type = exceptions->unavailable;
      break;
    case StatusCode::kInvalidArgument:
      type = exceptions->invalid;
      break;
    case StatusCode::kNotFound:
      type = exceptions->not_found;
      break;
    case StatusCode::kPermissionDenied:
      type = exceptions->permission;
      break;
    case StatusCode::kResourceExhausted:
      type = exceptions->limit;
      break;
    case StatusCode::kDeadlineExceeded:
      type = exceptions->timeout;
      break;
    case StatusCode::kDataLoss:
      type = exceptions->sample;
      break;
    case StatusCode::kCancelled:
      type = exceptions->cancelled;
      break;
    case StatusCode::kProtocolError:
      type = exceptions->protocol;
      break;
    case StatusCode::kEndOfStream:
      type = exceptions->end_of_stream;
      break;
    default:
      break;
  }
  // Messages can quote file names that are not UTF-8: keep such bytes as
  // \xNN instead of replacing the error with a UnicodeDecodeError.
  const std::string& message = status.message();
  py::object text = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
      message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace"));
  PyErr_SetObject(type.ptr(), text.ptr());
  throw py::error_already_set();
}

template <typename T>
T Unwrap(galley::Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

py::dict InfoToDict(const galley::JobInfo& info) {
  py::dict d;
  d["job_id"] = info.job_id;
  d["dataset_size"] = info.dataset_size;
  d["subset_size"] = info.subset_size;
  d["epoch_size"] = info.epoch_size;
  d["batches_per_epoch"] = info.batches_per_epoch;
  d["classes"] = info.classes;
  d["sample_shape"] = info.sample_shape;
  d["dtype"] = info.dtype == galley::DType::kUInt8 ? "uint8" : "float32";
  d["layout"] = info.layout == galley::Layout::kNCHW ? "NCHW" : "NHWC";
  d["slots"] = info.slots;
  d["segment_bytes"] = info.segment_bytes;
  return d;
}

galley::JobSpec SpecFromDict(const py::dict& d) {
  galley::JobSpec spec;
  auto get = [&](const char* key) -> py::object {
    if (d.contains(key)) return d[key];
    return py::none();
  };
  spec.dataset = get("dataset").cast<std::string>();
  if (!get("classes").is_none()) spec.classes = get("classes").cast<std::vector<std::string>>();
  if (!get("id_ranges").is_none()) {
    spec.id_ranges = get("id_ranges").cast<std::vector<std::pair<uint64_t, uint64_t>>>();
  }
  if (!get("ids").is_none()) spec.ids = get("ids").cast<std::vector<uint64_t>>();
  spec.batch_size = get("batch_size").cast<uint32_t>();
  if (!get("drop_last").is_none()) spec.drop_last = get("drop_last").cast<bool>();
  spec.transform_json = get("transform_json").cast<std::string>();
  if (!get("seed").is_none()) spec.seed = get("seed").cast<uint64_t>();
  if (!get("epochs").is_none()) spec.epochs = get("epochs").cast<uint64_t>();
  if (!get("start_epoch").is_none()) spec.start_epoch = get("start_epoch").cast<uint64_t>();
  if (!get("rank").is_none()) spec.rank = get("rank").cast<uint32_t>();
  if (!get("world_size").is_none()) spec.world_size = get("world_size").cast<uint32_t>();
  if (!get("prefetch").is_none()) spec.prefetch = get("prefetch").cast<uint32_t>();
  if (!get("on_error").is_none()) spec.on_error = get("on_error").cast<std::string>();
  if (!get("policy").is_none()) spec.policy = get("policy").cast<std::string>();
  if (!get("ods_fraction").is_none()) spec.ods_fraction = get("ods_fraction").cast<double>();
  if (!get("name").is_none()) spec.name = get("name").cast<std::string>();
  if (!get("shards").is_none()) spec.shards = get("shards").cast<std::vector<std::string>>();
  if (!get("image_key").is_none()) spec.image_key = get("image_key").cast<std::string>();
  if (d.contains("label_key")) {
    spec.label_key = get("label_key").is_none() ? "" : get("label_key").cast<std::string>();
  }
  if (!get("shard_drop_last").is_none()) {
    spec.shard_drop_last = get("shard_drop_last").cast<bool>();
  }
  if (!get("shuffle").is_none()) spec.shuffle = get("shuffle").cast<bool>();
  if (!get("start_batch").is_none()) spec.start_batch = get("start_batch").cast<uint64_t>();
  if (!get("native_size").is_none()) spec.native_size = get("native_size").cast<bool>();
  if (!get("resume_consumed").is_none()) {
    spec.resume_consumed = get("resume_consumed").cast<std::vector<uint64_t>>();
  }
  return spec;
}

// One leased batch's tensor memory, exposed through the buffer protocol so
// that torch.frombuffer (or numpy.asarray) can view it without a copy and
// without this module linking NumPy: it works the same under NumPy 1 and 2,
// or with no NumPy at all. The slot goes back to the daemon when the last
// view of this object is freed.
class BatchMemory {
 public:
  explicit BatchMemory(galley::Batch batch) : batch_(std::move(batch)) {}

  py::buffer_info Buffer() {
    const auto shape = batch_.shape();
    std::vector<py::ssize_t> dims(shape.begin(), shape.end());
    const py::ssize_t itemsize = ItemSize();
    std::vector<py::ssize_t> strides(dims.size());
    py::ssize_t stride = itemsize;
    for (size_t i = dims.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= dims[i];
    }
    const std::string format = batch_.dtype() == galley::DType::kUInt8
                                   ? py::format_descriptor<uint8_t>::format()
                                   : py::format_descriptor<float>::format();
    return py::buffer_info(batch_.data(), itemsize, format, static_cast<py::ssize_t>(dims.size()),
                           dims, strides, /*readonly=*/false);
  }

  py::tuple Shape() const {
    const auto shape = batch_.shape();
    py::tuple t(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) t[i] = shape[i];
    return t;
  }
  const char* DTypeName() const {
    return batch_.dtype() == galley::DType::kUInt8 ? "uint8" : "float32";
  }
  py::ssize_t ItemSize() const { return batch_.dtype() == galley::DType::kUInt8 ? 1 : 4; }
  py::ssize_t NumBytes() const {
    py::ssize_t n = ItemSize();
    for (int64_t d : batch_.shape()) n *= d;
    return n;
  }
  const galley::Batch& batch() const { return batch_; }

 private:
  galley::Batch batch_;
};

template <typename Int>
py::bytearray Int64Bytes(std::span<const Int> values) {
  static_assert(sizeof(Int) == sizeof(int64_t));
  return py::bytearray(reinterpret_cast<const char*>(values.data()),
                       values.size() * sizeof(int64_t));
}

// Turns a leased batch into (tensor memory, labels, item ids, metadata);
// labels and ids are little int64 byte arrays copied out of the slot.
py::tuple BatchToPython(galley::Batch batch) {
  auto memory = std::make_unique<BatchMemory>(std::move(batch));
  const galley::Batch& b = memory->batch();
  py::bytearray labels = Int64Bytes(b.labels());
  py::bytearray ids = Int64Bytes(b.item_ids());
  py::dict meta;
  meta["epoch"] = b.epoch();
  meta["batch_index"] = b.batch_index();
  meta["last_in_epoch"] = b.last_in_epoch();
  meta["end_of_stream"] = b.end_of_stream();
  meta["skipped"] = b.skipped();
  // A failed file's name need not be UTF-8 (a Latin-1 folder, say); show
  // such bytes as \xNN rather than fail with UnicodeDecodeError.
  const std::string first_error = b.first_error();
  meta["first_error"] = py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(
      first_error.data(), static_cast<Py_ssize_t>(first_error.size()), "backslashreplace"));
  return py::make_tuple(py::cast(std::move(memory)), labels, ids, meta);
}

}  // namespace

PYBIND11_MODULE(_galley, m) {
  m.doc() = "galley client extension; use the `galley` package instead.";
  static Exceptions ex;
  exceptions = &ex;
  auto make = [&](const char* name, py::handle base) {
    py::object type = py::reinterpret_steal<py::object>(
        PyErr_NewException((std::string("galley.") + name).c_str(), base.ptr(), nullptr));
    m.attr(name) = type;
    return type;
  };
  ex.base = make("GalleyError", PyExc_RuntimeError);
  ex.unavailable = make("ServerUnavailable", ex.base);
  ex.invalid = make("InvalidRequest", py::make_tuple(ex.base, py::handle(PyExc_ValueError)));
  ex.not_found =
      make("DatasetNotFound", py::make_tuple(ex.base, py::handle(PyExc_FileNotFoundError)));
  ex.permission = make("AccessDenied", py::make_tuple(ex.base, py::handle(PyExc_PermissionError)));
  ex.limit = make("ResourceLimit", ex.base);
  ex.timeout = make("Timeout", py::make_tuple(ex.base, py::handle(PyExc_TimeoutError)));
  ex.sample = make("SampleError", ex.base);
  ex.cancelled = make("JobCancelled", ex.base);
  ex.protocol = make("ProtocolError", ex.base);
  ex.end_of_stream = make("EndOfStream", ex.base);

  m.def("default_socket_path", &galley::DefaultSocketPath);
  m.def("user_socket_path", &galley::UserSocketPath);
  m.def("system_socket_path", &galley::SystemSocketPath);
  m.attr("__version__") = galley::kVersion;
  m.attr("protocol_version") = galley::kProtocolVersion;

  py::class_<BatchMemory>(m, "BatchMemory", py::buffer_protocol())
      .def_buffer(&BatchMemory::Buffer)
      .def_property_readonly("shape", &BatchMemory::Shape)
      .def_property_readonly("dtype", &BatchMemory::DTypeName)
      .def_property_readonly("nbytes", &BatchMemory::NumBytes);

  py::class_<galley::Job>(m, "Job")
      .def_property_readonly("info", [](const galley::Job& job) { return InfoToDict(job.info()); })
      .def(
          "next",
          [](galley::Job& job, double timeout_s) {
            galley::Result<galley::Batch> batch = galley::Status::Internal("unset");
            {
              py::gil_scoped_release release;
              batch = job.Next(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
            }
            return BatchToPython(Unwrap(std::move(batch)));
          },
          py::arg("timeout") = 60.0)
      .def("seek_epoch",
           [](galley::Job& job, uint64_t epoch) {
             galley::Status s;
             {
               py::gil_scoped_release release;
               s = job.SeekEpoch(epoch);
             }
             if (!s.ok()) Raise(s);
           })
      .def("stats",
           [](galley::Job& job) {
             auto text = Unwrap(job.Stats());
             return py::module_::import("json").attr("loads")(text);
           })
      .def("close", &galley::Job::Close);

  py::class_<galley::Client>(m, "Client")
      .def(py::init([](const std::string& socket_path, double timeout_s) {
             galley::ClientOptions options;
             if (!socket_path.empty()) options.socket_path = socket_path;
             options.client_name = "galley-python";
             options.request_timeout =
                 std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
             galley::Result<galley::Client> client = galley::Status::Internal("unset");
             {
               py::gil_scoped_release release;
               client = galley::Client::Connect(options);
             }
             return std::make_unique<galley::Client>(Unwrap(std::move(client)));
           }),
           py::arg("socket_path") = "", py::arg("timeout") = 30.0)
      .def("open_job",
           [](const galley::Client& client, const py::dict& spec_dict) {
             galley::JobSpec spec = SpecFromDict(spec_dict);
             galley::Result<galley::Job> job = galley::Status::Internal("unset");
             {
               py::gil_scoped_release release;
               job = client.OpenJob(spec);
             }
             return std::make_unique<galley::Job>(Unwrap(std::move(job)));
           })
      .def("query",
           [](const galley::Client& client, const std::string& what) {
             auto text = Unwrap(client.Query(what));
             return py::module_::import("json").attr("loads")(text);
           })
      // Control requests (docs/access.md): each raises what galleyd refused.
      .def("cancel",
           [](const galley::Client& client, uint64_t job_id) {
             if (galley::Status s = client.Cancel(job_id); !s.ok()) Raise(s);
           })
      .def("drain",
           [](const galley::Client& client) {
             if (galley::Status s = client.Drain(); !s.ok()) Raise(s);
           })
      .def("forget", [](const galley::Client& client, const std::string& dataset) {
        if (galley::Status s = client.Forget(dataset); !s.ok()) Raise(s);
      });
}
