#include "tests/integration/in_process_daemon.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <mutex>

namespace galley::testing {

std::vector<std::string> DaemonCommandLine(const std::filesystem::path& socket,
                                           const std::vector<std::string>& flags, bool quiet) {
  std::vector<std::string> command_line = {"galleyd", "--socket", socket.string()};
  if (quiet) command_line.insert(command_line.end(), {"--log-level", "warn"});
  command_line.insert(command_line.end(), flags.begin(), flags.end());
  return command_line;
}

Result<std::unique_ptr<Daemon>> StartDaemon(const std::vector<std::string>& command_line) {
  GALLEY_ASSIGN_OR_RETURN(LoadedOptions loaded, LoadDaemonOptions(command_line));
  spdlog::set_level(spdlog::level::from_str(loaded.options.log_level));
  GALLEY_ASSIGN_OR_RETURN(std::unique_ptr<Daemon> daemon, Daemon::Create(loaded.options));
  GALLEY_RETURN_IF_ERROR(daemon->Start());
  return daemon;
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
