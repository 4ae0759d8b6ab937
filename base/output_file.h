#pragma once
// Where a command's results go: a file named on the command line (--json, --out), "-" for
// standard output, or a folder of files (sweep/report --out). Control plane.
//
// A new path or an existing regular file (or a symlink to one) is written whole and atomically: a
// temporary file with a unique name in the same folder, then renamed over the path (two processes
// writing one path never swap halves; a reader sees the old document or the new one); it gets a
// new file's mode (0666 less the umask), or the replaced file's permission bits where it was this
// user's — never setuid, setgid or sticky. Anything else that exists — a FIFO, a character
// device, /dev/fd/N, a process substitution — is written into, in place, and never replaced. A
// folder where a file belongs is bad input, found before anything runs.
//
// Every path is walked as base/path_walk.h says: another user's symlink, FIFO, file or folder in a
// folder other users can write (/tmp) is neither followed nor written — bad input, one sentence —
// whatever fs.protected_* say, and what is created lands in the folder that was checked.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace txbatch {

// One output file, checked before anything is measured. `what` names the option in sentences
// ("--json file", "--out file").
class OutputFile {
 public:
  // Bad input (one sentence) unless `path` can be written: "-", a new file in an existing,
  // writable folder, an existing regular file there, or an existing writable non-folder.
  // Standard output already claimed by another output is refused (two documents cannot share
  // it). A FIFO (or a pipe's /dev/fd name) is opened here, and held until written: one no
  // process opens for reading within a few seconds is refused now, not after the measurement
  // (issue 44, item 13), and a reader that opened it sees no end of file before the document.
  static Result<OutputFile> Check(std::string path, std::string what);

  // Whether the document goes to this process's standard output ("-", /dev/stdout, or any path
  // naming the file standard output already is).
  bool to_stdout() const { return to_stdout_; }
  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }

  // Moves everything the process prints on standard output (tables, EAL's log) to standard error
  // and keeps the original standard output for this file's document alone, as `iperf3 --json`
  // does. Call once, before anything is printed; a no-op unless to_stdout().
  void ClaimStdout();

  // Opens the file for writing as it goes (--stats-json, --capture): standard output (claimed
  // as ClaimStdout claims it; the descriptor a duplicate of it) or the path itself, truncated,
  // in place — never through a temporary, so a reader following it sees each write (a FIFO:
  // the descriptor Check opened, handed over). The descriptor is the caller's to close.
  Result<int> OpenStream();

  // Writes `text` as the whole file: atomically for a new path or a regular file, in place for
  // anything else (a FIFO through the descriptor Check opened, closed after it; a reader that
  // went away is EPIPE, not SIGPIPE). On failure nothing at the path has changed (regular
  // files), and the sentence names the path and the cause.
  Status Write(std::string_view text) const;

 private:
  friend class LineStream;
  OutputFile(std::string path, std::string what) : path_(std::move(path)), what_(std::move(what)) {}
  // The sentence for an open that failed with `err`.
  Error OpenFailure(int err) const;
  // A descriptor Check opened (a FIFO's), shared by the copies of this OutputFile; -1 once
  // Write closed it or OpenStream handed it over.
  struct Held {
    int fd = -1;
    ~Held();
  };
  std::string path_;
  std::string what_;
  bool to_stdout_ = false;
  int stdout_fd_ = -1;  // the original standard output, once claimed
  std::shared_ptr<Held> held_;
  // What claimed standard output ("--json file"), if anything did: one per process.
  static std::string stdout_claimed_by_;
};

// Lines written as they are made (--stats-json's NDJSON), for a reader that follows them: to
// standard output (claimed as OutputFile::ClaimStdout claims it), or into the file itself,
// truncated when opened — never through a temporary, so `tail -f` and a FIFO into `jq` see each
// line as it is written (a FIFO nobody reads is waited for as Write waits). Each line goes in one
// write(2). After a failed write nothing more is written; the first failure's sentence is kept,
// and in a regular file it opened (not standard output) a line the write cut short (a full
// disk) is taken back: the file ends with the last whole line.
class LineStream {
 public:
  // Opens `out` (checked by OutputFile::Check) for streaming; its failure is one sentence.
  static Result<LineStream> Open(OutputFile out);
  LineStream(LineStream&& other) noexcept;
  LineStream& operator=(LineStream&&) = delete;
  LineStream(const LineStream&) = delete;
  ~LineStream();

  // Writes `line` and a newline; false once a write failed (failure() says why).
  bool WriteLine(std::string_view line);
  // The first failed write's sentence; empty while every write succeeded.
  const std::string& failure() const { return failure_; }

 private:
  LineStream(OutputFile out, int fd, bool regular)
      : out_(std::move(out)), fd_(fd), regular_(regular) {}
  OutputFile out_;
  int fd_ = -1;  // closed at the end
  bool regular_ = false;  // a regular file: a line cut short can be taken back
  std::string failure_;
};

// From now on, a write to an output whose reader stopped reading (a FIFO, a pipe, a terminal held)
// is abandoned once it has made no progress for a second: called at the first stop signal (it
// is async-signal-safe), so a stalled reader cannot keep a stopping txbatch from writing its
// other outputs and ending. Before it, such a write waits, as a pipe's writer does.
void GiveUpOnStalledReaders();
bool GivingUpOnStalledReaders();

// Refuses (one sentence) two of a command's outputs, (option, path) pairs, that name one regular
// or new file: each would replace or truncate what the other wrote. Devices (/dev/null) and
// FIFOs may be shared; empty paths and "-" are left out.
Status DistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outputs);

// A folder of output files (sweep/report --out): the folder may exist (its files are replaced)
// or be new in an existing, writable folder. Checked before anything runs; created only when
// something is written.
class OutputDir {
 public:
  static Result<OutputDir> Check(std::string dir);
  const std::string& path() const { return dir_; }

  // Writes every (name, text) pair, all or none: each into a unique temporary file first, and
  // only when all are written are they renamed to their names. On failure the temporaries are
  // removed, and so is the folder if this call created it. (A rename failing partway, which a
  // full disk cannot cause, would leave the files renamed before it.)
  Status WriteAll(const std::vector<std::pair<std::string, std::string>>& files) const;

 private:
  explicit OutputDir(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

}  // namespace txbatch
