// The `galley._galley` extension: binds the public C++ client (the
// installed galley/*.h headers) and nothing else. A batch's tensor memory is a
// buffer-protocol object viewing the shared-memory slot; the slot is released
// when the last view of it (a torch tensor made by torch.frombuffer) is freed. Status values become
// Python exceptions with the daemon's message intact.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "galley/client.h"
#include "galley/sampling_policies.h"
#include "galley/shard_members.h"
#include "galley/version.h"

namespace py = pybind11;

namespace {

struct Exceptions {
  py::object base, unavailable, invalid, not_found, permission, limit, timeout, sample, cancelled,
      protocol, end_of_stream;
};
// Never destroyed: static destructors run after the interpreter is gone,
// when releasing a Python object is no longer allowed.
Exceptions* exceptions = nullptr;
// The interpreter's main thread, which is the one that finalizes it.
unsigned long main_thread_ident = 0;

bool InterpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

// Takes the GIL back after a wait in the client. A thread that comes back
// while the interpreter is finalizing (a daemon thread whose wait ended as
// the process exits) must not take it: CPython would end the thread with
// pthread_exit, whose unwinding aborts the process ("terminate called without
// an active exception") when it meets a noexcept frame, such as the
// destructor of pybind11's scoped release. Such a thread waits here for the
// process to end instead, as CPython 3.14 itself has such threads do. The
// GIL is taken back here, in plain code, never from a destructor, so that if
// finalization starts between the check and the call the unwinding passes.
void ReacquireGil(PyThreadState* state) {
  if (InterpreterFinalizing() && PyThread_get_thread_ident() != main_thread_ident) {
    for (;;) std::this_thread::sleep_for(std::chrono::hours(24));
  }
  PyEval_RestoreThread(state);
}

// Runs `wait` (a blocking client call, which reports failures as values)
// without the GIL, so other Python threads run meanwhile.
template <typename Wait>
auto WithoutGil(Wait&& wait) -> decltype(wait()) {
  PyThreadState* state = PyEval_SaveThread();
  std::optional<decltype(wait())> result;
  try {
    result.emplace(wait());
  } catch (...) {  // std::bad_alloc: raised to Python, with the GIL held
    ReacquireGil(state);
    throw;
  }
  ReacquireGil(state);
  return std::move(*result);
}

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
  d["dtype"] = std::string(galley::DTypeName(info.dtype));
  d["layout"] = std::string(galley::LayoutName(info.layout));
  d["slots"] = info.slots;
  d["segment_bytes"] = info.segment_bytes;
  d["content_key"] = info.content_key;
  d["mtimes_key"] = info.mtimes_key;
  d["dataset_bytes"] = info.dataset_bytes;
  d["left_out"] = info.left_out;
  d["left_out_samples"] = info.left_out_samples;
  d["field_collations"] = info.field_collations;
  d["image_key"] = info.image_key;
  return d;
}

// The loader's job as a dict in the OpenJob body's form (docs/protocol.md
// §1.4), parsed by the client library: an unknown key or a bad value is an
// InvalidRequest naming it, as the daemon would say.
galley::JobSpec SpecFromDict(const py::dict& d) {
  const std::string text = py::module_::import("json").attr("dumps")(d).cast<std::string>();
  return Unwrap(galley::ParseJobSpec(text));
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
  std::string DTypeName() const { return std::string(galley::DTypeName(batch_.dtype())); }
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

// A batch's field values as one list of bytes per field, each holding the
// samples in order: the raw form python/galley/fields.py decodes.
py::list FieldColumns(const galley::Batch& batch, size_t count) {
  py::list columns;
  for (size_t f = 0; f < count; ++f) columns.append(py::list());
  for (uint32_t i = 0; i < batch.size(); ++i) {
    auto values = batch.fields(i);
    if (!values.ok()) Raise(values.status());
    for (size_t f = 0; f < count; ++f) {
      const auto& value = (*values)[f];
      columns[f].cast<py::list>().append(
          py::bytes(reinterpret_cast<const char*>(value.data()), value.size()));
    }
  }
  return columns;
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
  if (b.field_count() > 0) meta["fields"] = FieldColumns(b, b.field_count());
  return py::make_tuple(py::cast(std::move(memory)), labels, ids, meta);
}

}  // namespace

PYBIND11_MODULE(_galley, m) {
  m.doc() = "galley client extension; use the `galley` package instead.";
  exceptions = new Exceptions();
  Exceptions& ex = *exceptions;
  main_thread_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
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
  m.def("service_uid", &galley::ServiceUid);
  m.def("check_socket_folder", [](const std::string& socket_path) {
    if (galley::Status s = galley::CheckUserSocketFolder(socket_path); !s.ok()) Raise(s);
  });
  m.attr("__version__") = galley::kVersion;
  m.attr("protocol_version") = galley::kProtocolVersion;
  // The one lists of the job spec's fields and of the sampling policies (by
  // name: true for those a job with shuffle=True may name).
  m.attr("job_spec_fields") = galley::JobSpecFieldNames();
  py::dict policies;
  for (const galley::SamplingPolicyName& policy : galley::kSamplingPolicies) {
    policies[py::str(std::string(policy.name))] = policy.random_order;
  }
  m.attr("sampling_policies") = policies;
  // Figures the package checks before it asks a daemon, so that its errors
  // come first and agree with galleyd's: max_resolution's bounds, the fields
  // a listing request takes, the most bytes a request carries, and the words
  // of the native-size failure it turns into a ValueError.
  m.attr("max_resolution_range") =
      py::make_tuple(galley::kMinMaxResolution, galley::kMaxMaxResolution);
  m.attr("listing_fields") = py::tuple(py::cast(galley::ListingFieldNames()));
  m.attr("max_request_bytes") = galley::kMaxRequestBytes;
  m.attr("native_size_mismatch") = std::string(galley::kNativeSizeMismatch);
  // A shard member's kind by its extension, as galleyd checks it: the image
  // member's extensions in the order they are tried, then the field values
  // that must be JSON, integers or text (galley/fields.py decodes them so).
  auto names = [](std::span<const std::string_view> list) {
    py::tuple out(list.size());
    for (size_t i = 0; i < list.size(); ++i) out[i] = py::str(std::string(list[i]));
    return out;
  };
  py::dict kinds;
  kinds["image"] = names(galley::kShardImageExtensions);
  kinds["json"] = names(galley::kJsonMemberExtensions);
  kinds["integer"] = names(galley::kIntegerMemberExtensions);
  kinds["text"] = names(galley::kTextMemberExtensions);
  m.attr("shard_member_kinds") = kinds;

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
            galley::Result<galley::Batch> batch = WithoutGil([&] {
              return job.Next(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
            });
            return BatchToPython(Unwrap(std::move(batch)));
          },
          py::arg("timeout") = 60.0)
      .def(
          "seek_epoch",
          [](galley::Job& job, uint64_t epoch, std::optional<std::vector<uint64_t>> items) {
            const galley::Status s = WithoutGil(
                [&] { return items ? job.SeekEpoch(epoch, *items) : job.SeekEpoch(epoch); });
            if (!s.ok()) Raise(s);
          },
          py::arg("epoch"), py::arg("items") = py::none())
      .def("stats",
           [](galley::Job& job) {
             // Waits for a Next() of another thread on the same job.
             auto text = Unwrap(WithoutGil([&] { return job.Stats(); }));
             return py::module_::import("json").attr("loads")(text);
           })
      .def("refresh_credentials",
           [](galley::Job& job, const py::dict& s3) {
             // The dict galley/s3_access.py resolves, as OpenJob's `s3`.
             galley::ObjectStoreAccess access;
             access.endpoint_url = s3["endpoint_url"].cast<std::string>();
             access.region = s3["region"].cast<std::string>();
             access.path_style = s3["path_style"].cast<bool>();
             access.access_key_id = s3["access_key_id"].cast<std::string>();
             access.secret_access_key = s3["secret_access_key"].cast<std::string>();
             access.session_token = s3["session_token"].cast<std::string>();
             const galley::Status s = WithoutGil([&] { return job.RefreshCredentials(access); });
             if (!s.ok()) Raise(s);
           })
      .def("close", &galley::Job::Close);

  py::class_<galley::Client>(m, "Client")
      .def(py::init([](const std::string& socket_path, double timeout_s) {
             galley::ClientOptions options;
             if (!socket_path.empty()) options.socket_path = socket_path;
             options.client_name = "galley-python";
             options.request_timeout =
                 std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
             galley::Result<galley::Client> client =
                 WithoutGil([&] { return galley::Client::Connect(options); });
             return std::make_unique<galley::Client>(Unwrap(std::move(client)));
           }),
           py::arg("socket_path") = "", py::arg("timeout") = 30.0)
      // The daemon as the kernel reported it on the checked connection.
      .def_property_readonly("daemon_pid",
                             [](const galley::Client& client) { return client.daemon().pid; })
      .def_property_readonly("daemon_uid",
                             [](const galley::Client& client) { return client.daemon().uid; })
      .def("open_job",
           [](const galley::Client& client, const py::dict& spec_dict) {
             galley::JobSpec spec = SpecFromDict(spec_dict);
             galley::Result<galley::Job> job = WithoutGil([&] { return client.OpenJob(spec); });
             return std::make_unique<galley::Job>(Unwrap(std::move(job)));
           })
      .def("query",
           [](const galley::Client& client, const std::string& what) {
             auto text = Unwrap(client.Query(what));
             return py::module_::import("json").attr("loads")(text);
           })
      .def(
          "listing",
          [](const galley::Client& client, const py::dict& spec_dict, uint64_t begin,
             std::optional<uint64_t> count) {
            // The dataset's fields only; the rest of a loader's spec is not sent.
            py::dict named;
            for (const std::string& key : galley::ListingFieldNames()) {
              if (spec_dict.contains(key)) named[key.c_str()] = spec_dict[key.c_str()];
            }
            named["batch_size"] = 1;
            named["transform"] = py::dict();
            galley::JobSpec spec = SpecFromDict(named);
            galley::Result<std::string> text = galley::Status::Internal("unset");
            {
              py::gil_scoped_release release;
              text = client.Listing(spec, begin, count.value_or(UINT64_MAX));
            }
            return py::module_::import("json").attr("loads")(Unwrap(std::move(text)));
          },
          py::arg("spec"), py::arg("begin") = 0, py::arg("count") = py::none())
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
