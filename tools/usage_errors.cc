#include "tools/usage_errors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <string_view>

#include "tools/session.h"

namespace txbatch {
namespace {

// A number (-1, 0.5), which is an argument CLI11 may read as a value, not an option.
bool IsNumber(std::string_view text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

// An argument written as an option: -x, --name or --name=value (not "-", not a number).
bool LooksLikeOption(std::string_view arg) {
  return arg.size() > 1 && arg[0] == '-' && !IsNumber(arg);
}

// The option's name in --name=value.
std::string_view OptionName(std::string_view arg) { return arg.substr(0, arg.find('=')); }

// "a", "a and b", "a, b and c".
std::string Listed(const std::vector<std::string>& items) {
  if (items.size() < 2) return items.empty() ? "" : items.front();
  return fmt::format("{} and {}", fmt::join(items.begin(), items.end() - 1, ", "), items.back());
}

// Where `name` (an option) was first typed in `args`: as itself or as name=value.
size_t TypedAt(const std::vector<std::string>& args, std::string_view name) {
  for (size_t i = 0; i < args.size(); ++i)
    if (OptionName(args[i]) == name) return i;
  return args.size();
}

// The subcommands `cmd` has, by name.
std::vector<std::string> SubcommandNames(const CLI::App& cmd) {
  std::vector<std::string> names;
  for (const CLI::App* sub :
       cmd.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); }))
    names.push_back(sub->get_name());
  return names;
}

// An option that takes a list takes it comma-separated (its --help says so).
bool TakesAList(const CLI::Option* opt) {
  return opt != nullptr && opt->get_description().find("comma-separated") != std::string::npos;
}

// Arguments left over (CLI11's ExtrasError): options the command does not have, or values no
// option took.
std::string Leftovers(const CLI::App& cmd, const std::vector<std::string>& left,
                      std::string_view command) {
  std::vector<std::string> unknown;
  std::vector<std::string> quoted;
  for (const std::string& a : left) {
    if (LooksLikeOption(a)) unknown.emplace_back(OptionName(a));
    quoted.push_back(fmt::format("'{}'", a));
  }
  if (!unknown.empty()) {
    std::string sentence = fmt::format("{} has no option{} {}", command,
                                       unknown.size() > 1 ? "s" : "", Listed(unknown));
    if (left.size() > unknown.size()) sentence += fmt::format(" (given: {})", fmt::join(left, " "));
    return sentence;
  }
  std::vector<std::string> positionals;
  for (const CLI::Option* o :
       cmd.get_options([](const CLI::Option* o) { return o->get_positional(); }))
    positionals.push_back(o->get_name());
  const bool several = left.size() > 1;
  if (!positionals.empty())
    return fmt::format("{} {} more than {} takes (its {})", Listed(quoted),
                       several ? "are arguments" : "is an argument", command, Listed(positionals));
  const auto lists = cmd.get_options([](const CLI::Option* o) { return TakesAList(o); });
  return fmt::format("{} {} no option that takes {}: {} takes no other arguments{}", Listed(quoted),
                     several ? "follow" : "follows", several ? "them" : "it", command,
                     lists.empty() ? ""
                                   : fmt::format(" (each option takes one value; a list is "
                                                 "comma-separated, e.g. {} A,B)",
                                                 lists.front()->get_name()));
}

// A command or subcommand missing (CLI11's "A subcommand is required"), or not one of them.
std::string NoCommand(const CLI::App& cmd, const std::vector<std::string>& left,
                      std::string_view command) {
  const std::string valid = fmt::format("{}", fmt::join(SubcommandNames(cmd), ", "));
  if (left.empty()) return fmt::format("{} needs a command; valid: {}", command, valid);
  if (LooksLikeOption(left.front()))
    return fmt::format("{} has no option {}, and needs a command first; valid: {}", command,
                       OptionName(left.front()), valid);
  return fmt::format("'{}' is not a command of {}; valid: {}", left.front(), command, valid);
}

}  // namespace

const CLI::App& ParsedCommand(const CLI::App& app) {
  const CLI::App* cmd = &app;
  while (!cmd->get_subcommands().empty()) cmd = cmd->get_subcommands().front();
  return *cmd;
}

std::string CommandWords(const CLI::App& cmd) {
  std::vector<std::string> words;
  for (const CLI::App* c = &cmd; c != nullptr; c = c->get_parent())
    if (!c->get_name().empty()) words.insert(words.begin(), c->get_name());
  if (words.empty() || words.front() != "txbatch") words.insert(words.begin(), "txbatch");
  return fmt::format("{}", fmt::join(words, " "));
}

std::optional<MisplacedOption> OptionInPlaceOfValue(const CLI::App& app,
                                                    const std::vector<std::string>& args) {
  const CLI::App* cmd = &app;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!LooksLikeOption(a)) {
      for (const CLI::App* sub :
           cmd->get_subcommands([&a](const CLI::App* s) { return s->get_name() == a; }))
        cmd = sub;
      continue;
    }
    if (a.find('=') != std::string::npos) continue;  // --name=value: its value is there
    const CLI::Option* opt = cmd->get_option_no_throw(a);
    if (opt == nullptr || opt->get_items_expected_min() == 0 || i + 1 == args.size()) continue;
    // EAL's arguments are options themselves (--eal-extra "--log-level=...").
    if (opt->get_name() == "--eal-extra") {
      ++i;
      continue;
    }
    const std::string& next = args[i + 1];
    if (LooksLikeOption(next) && cmd->get_option_no_throw(std::string(OptionName(next))))
      return MisplacedOption{fmt::format("{} needs a value, and the next argument is the option {}",
                                         a, OptionName(next)),
                             cmd};
    ++i;  // the value
  }
  return std::nullopt;
}

std::string UsageSentence(const CLI::ParseError& e, const CLI::App& app,
                          const std::vector<std::string>& args, std::string_view command) {
  const CLI::App& cmd = ParsedCommand(app);
  const std::string what = e.what();
  // The option a message of CLI11's starts with ("--procs: At Most 1 required ...").
  const auto lead = [&what](std::string_view end) { return what.substr(0, what.find(end)); };
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr)
    return Leftovers(cmd, app.remaining(true), command);
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    if (what.starts_with("A subcommand")) return NoCommand(cmd, app.remaining(true), command);
    const std::string name = lead(" is required");
    const CLI::Option* opt = cmd.get_option_no_throw(name);
    if (opt != nullptr && opt->get_positional() && !opt->get_description().empty()) {
      std::string about = opt->get_description();
      about[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(about[0])));
      return fmt::format("{} needs its {} argument: {}", command, name, about);
    }
    if (opt != nullptr) return fmt::format("{} needs {}", command, name);
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    if (const size_t at = what.find(": At Most "); at != std::string::npos) {
      const std::string name = what.substr(0, at);
      const std::string times = what.substr(what.rfind(' ') + 1);
      return fmt::format("{} was given {} times; valid: once{}", name, times,
                         TakesAList(cmd.get_option_no_throw(name))
                             ? fmt::format(", the values comma-separated in it ({} A,B)", name)
                             : "");
    }
    if (what.find(" required ") != std::string::npos && what.ends_with(" missing"))
      return fmt::format("{} needs a value", lead(":"));
    if (what.starts_with("Expected ")) {
      const size_t to = what.find(" to ");
      const size_t comma = what.rfind(',');
      if (to != std::string::npos && comma != std::string::npos && comma > to)
        return fmt::format("{} needs a value", what.substr(to + 4, comma - to - 4));
    }
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&e) != nullptr) {
    const size_t at = what.find(" excludes ");
    std::string first = what.substr(0, at);
    std::string second = what.substr(at + 10);
    if (TypedAt(args, second) < TypedAt(args, first)) std::swap(first, second);
    return fmt::format("{} and {} cannot be given together; valid: one of them", first, second);
  }
  if (dynamic_cast<const CLI::RequiresError*>(&e) != nullptr) {
    const size_t at = what.find(" requires ");
    return fmt::format("{} needs {} too", what.substr(0, at), what.substr(at + 10));
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    // CLI11's own (txbatch's validators throw sentences of theirs, passed on as they are).
    if (what.starts_with("Could not convert: ")) {
      const std::string rest = what.substr(19);
      const size_t eq = rest.find(" = ");
      const std::string name = rest.substr(0, eq);
      const std::string value = eq == std::string::npos ? "" : rest.substr(eq + 3);
      const CLI::Option* opt = cmd.get_option_no_throw(name);
      if (opt != nullptr && opt->get_expected_max() == 0)
        return fmt::format("{}={} is not valid: {} is a flag and takes no value; valid: {} alone",
                           name, value, name, name);
      return fmt::format("{} '{}' is not valid", name, value);
    }
    for (std::string_view flag_end :
         {": too many inputs for a flag", ": Should be true/false or a number"})
      if (what.ends_with(flag_end))
        return fmt::format("{} is a flag and takes no value; valid: {} alone", lead(flag_end),
                           lead(flag_end));
  }
  return what;
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto refuse = [](const std::string& sentence, const CLI::App& cmd) {
    const std::string words = CommandWords(cmd);
    std::fprintf(stderr, "txbatch: %s; run '%s --help' for the valid options.\n", sentence.c_str(),
                 words.c_str());
    return kExitBadInput;
  };
  if (auto misplaced = OptionInPlaceOfValue(app, args))
    return refuse(misplaced->sentence, *misplaced->command);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const CLI::App& cmd = ParsedCommand(app);
    return refuse(UsageSentence(e, app, args, CommandWords(cmd)), cmd);
  }
  return std::nullopt;
}

}  // namespace txbatch
