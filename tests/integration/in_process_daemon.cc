#include "tests/integration/in_process_daemon.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "tests/integration/galleyd_process.h"

namespace galley::testing {

std::vector<std::string> DaemonCommandLine(const std::filesystem::path& socket,
                                           const std::vector<std::string>& flags, bool quiet) {
  std::vector<std::string> command_line = {"galleyd"};
  for (std::string& flag : TestDaemonFlags(socket, flags, quiet)) {
    command_line.push_back(std::move(flag));
  }
  return command_line;
}

Result<std::unique_ptr<Daemon>> StartDaemon(const std::vector<std::string>& command_line) {
  GALLEY_ASSIGN_OR_RETURN(LoadedOptions loaded, LoadDaemonOptions(command_line));
  spdlog::set_level(spdlog::level::from_str(loaded.options.log_level));
  GALLEY_ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon, Daemon::Create(loaded.options));
  GALLEY_RETURN_IF_ERROR(daemon->Start());
  return daemon;
}

InProcessGalleyd::InProcessGalleyd(const std::filesystem::path& socket,
                                   std::vector<std::string> extra_args, bool quiet)
    : socket_(socket.string()) {
  auto started = StartDaemon(DaemonCommandLine(socket, extra_args, quiet));
  if (!started.ok()) {
    start_status_ = started.status();
    return;
  }
  daemon_ = std::move(started).value();
  started_ = true;
}

InProcessGalleyd::~InProcessGalleyd() { Stop(); }

bool InProcessGalleyd::Stop() {
  if (daemon_ == nullptr) return !hung_;
  // The stop runs on a thread of its own so that a hang is reported rather
  // than waited out; the state it reports through outlives either side.
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  std::thread stopper([daemon = daemon_.get(), done] {
    daemon->Stop(Status::Cancelled("galleyd is shutting down"));
    std::lock_guard lock(done->mu);
    done->done = true;
    done->cv.notify_all();
  });
  std::unique_lock lock(done->mu);
  if (!done->cv.wait_for(lock, kStopBound, [&] { return done->done; })) {
    lock.unlock();
    stopper.detach();
    (void)daemon_.release();  // still in use by the stopper
    hung_ = true;
    return false;
  }
  lock.unlock();
  stopper.join();
  daemon_.reset();
  return true;
}

// Appends each formatted line to a string, under the sink's own mutex.
class CapturedLog::Sink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::string Text() {
    std::lock_guard lock(mutex_);
    return text_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t line;
    formatter_->format(message, line);
    text_.append(line.data(), line.size());
  }
  void flush_() override {}

 private:
  std::string text_;
};

CapturedLog::CapturedLog()
    : sink_(std::make_shared<Sink>()),
      previous_(spdlog::default_logger()),
      previous_level_(spdlog::get_level()) {
  sink_->set_pattern("%l %v");
  auto logger = std::make_shared<spdlog::logger>("captured", sink_);
  logger->set_level(previous_level_);
  spdlog::set_default_logger(std::move(logger));
}

CapturedLog::~CapturedLog() {
  spdlog::set_default_logger(previous_);
  spdlog::set_level(previous_level_);
}

std::string CapturedLog::Text() const { return sink_->Text(); }

}  // namespace galley::testing
