#pragma once
// CLI11's parse errors as txbatch's one sentence: the options named as the user typed them, in the
// order typed (CLI11 lists extras reversed), in txbatch's words rather than CLI11's ("The
// following arguments were not expected", "1 required FLOAT missing"). Control plane only.

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace txbatch {

// Parses txbatch's own arguments, argv[1] to argv[argc - 1], into `app`. Returns the exit status
// where nothing is to run: --help or --version printed (0), or bad input: one sentence on stderr
// (UsageSentence, or OptionInPlaceOfValue's) naming the command's --help, kExitBadInput.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// The command `app` parsed last: its deepest parsed subcommand ("lab up"), else `app`.
const CLI::App& ParsedCommand(const CLI::App& app);

// How a sentence names `cmd`: "txbatch" and the subcommands down to it ("txbatch lab up").
std::string CommandWords(const CLI::App& cmd);

// An option that takes a value, given another of the command's options where its value should
// be (`run --duration --warmup 0.01`): CLI11 takes the second option's name as the first one's
// value. Checked before CLI11 parses `args` (as typed, without the program's name): the sentence
// saying so and the command it was in, if they hold one. Options whose values are other
// programs' options (--eal-extra) are not checked.
struct MisplacedOption {
  std::string sentence;
  const CLI::App* command;
};
std::optional<MisplacedOption> OptionInPlaceOfValue(const CLI::App& app,
                                                    const std::vector<std::string>& args);

// The sentence for `e`, thrown while `app` parsed `args` (as typed, without the program's name);
// `command` names the command in it ("txbatch run"). Errors txbatch's own validators threw (a
// CLI::ConversionError carrying its sentence) are passed on as they are. No trailing period.
std::string UsageSentence(const CLI::ParseError& e, const CLI::App& app,
                          const std::vector<std::string>& args, std::string_view command);

}  // namespace txbatch
