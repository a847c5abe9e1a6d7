package terminal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/qwenc/qwenc/internal/fsutil"
	"github.com/qwenc/qwenc/qwen"
	"github.com/qwenc/qwenc/runtime/sampling"
)

// commandSpec describes a slash command for the parser, the help and Tab.
type commandSpec struct {
	names []string // the first is the one the help shows first
	args  string   // what follows the name, "" if nothing may
	help  string
}

func commandSpecs() []commandSpec {
	return []commandSpec{
		{[]string{"help", "?"}, "", "this help"},
		{[]string{"bye", "exit", "quit"}, "", "leave (also Ctrl-D)"},
		{[]string{"clear"}, "", "start a new conversation; the system message stays"},
		{[]string{"system"}, "TEXT", "set the system message and start a new conversation"},
		{[]string{"think"}, "on|off", "Qwen3, Qwen3.5: think before answering, or not (--no-think)"},
		{[]string{"set"}, "NAME VALUE", "sampling: " + strings.Join(sampling.Flags(), ", ")},
		{[]string{"show"}, "", "model, context used, sampling, thinking, system message"},
		{[]string{"save"}, "FILE", "write the conversation to FILE (JSON: role and content of each message)"},
		{[]string{"load"}, "FILE", "replace the conversation by the one saved in FILE, to continue it"},
	}
}

// command is a parsed slash command, its argument checked.
type command struct {
	name string // the spec's first name
	arg  string // /system's text, /save's and /load's file
	on   bool   // /think on
	// flag and change are /set's setting, by its flag's name, and the
	// change it makes.
	flag   string
	change func(*sampling.Params)
}

// parseLine tells a message from a command. A line whose first character
// (after blanks) is "/" is a command; "//" starts a message with one "/".
func parseLine(line string) (msg string, cmd *command, err error) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "/") {
		return line, nil, nil
	}
	if strings.HasPrefix(t, "//") {
		return strings.TrimLeft(line, " \t")[1:], nil, nil
	}
	word, arg, _ := strings.Cut(t[1:], " ")
	word, arg = strings.ToLower(word), strings.TrimSpace(arg)
	if i := strings.IndexByte(word, '\t'); i >= 0 { // "/save\tFILE"
		word, arg = word[:i], strings.TrimSpace(word[i:]+" "+arg)
	}
	for _, spec := range commandSpecs() {
		for _, name := range spec.names {
			if name == word {
				cmd, err := parseArgs(spec, arg)
				return "", cmd, err
			}
		}
	}
	return "", nil, fmt.Errorf("unknown command /%s; /? for help", word)
}

func parseArgs(spec commandSpec, arg string) (*command, error) {
	cmd := &command{name: spec.names[0], arg: arg}
	usage := fmt.Errorf("usage: /%s %s", cmd.name, spec.args)
	var err error
	switch {
	case spec.args == "" && arg != "":
		err = fmt.Errorf("/%s takes no argument", cmd.name)
	case cmd.name == "set": // its usage names the settings
		cmd.flag, cmd.change, err = parseSetting(arg)
	case spec.args != "" && arg == "":
		err = usage
	case cmd.name == "think":
		switch strings.ToLower(arg) {
		case "on":
			cmd.on = true
		case "off":
		default:
			err = usage
		}
	}
	if err != nil {
		return nil, err
	}
	return cmd, nil
}

// parseSetting parses /set's "NAME VALUE", the value held to the range
// the flag takes. Names may also be written as ollama writes them
// (top_k, temperature).
func parseSetting(arg string) (flag string, change func(*sampling.Params), err error) {
	fields := strings.Fields(arg)
	if len(fields) != 2 {
		return "", nil, fmt.Errorf("usage: /set NAME VALUE, where NAME is %s", strings.Join(sampling.Flags(), ", "))
	}
	flag, ok := sampling.FlagName(fields[0])
	if !ok {
		return "", nil, fmt.Errorf("/set: no setting %q; /? lists them", fields[0])
	}
	if err := new(sampling.Params).SetFlag(flag, fields[1]); err != nil {
		return "", nil, fmt.Errorf("/set %s %s: %s %v", fields[0], fields[1], flag, err)
	}
	return flag, func(p *sampling.Params) { p.SetFlag(flag, fields[1]) }, nil
}

// helpText is what /help prints.
func helpText() string {
	var b strings.Builder
	b.WriteString("Commands:\n")
	row := func(left, right string) { fmt.Fprintf(&b, "  %-22s %s\n", left, right) }
	for _, spec := range commandSpecs() {
		left := "/" + strings.Join(spec.names, ", /")
		if spec.args != "" {
			left += " " + spec.args
		}
		row(left, spec.help)
	}
	row("//TEXT", "send TEXT that starts with /")
	row(blockMark, "on a line of its own: begin a message of several lines; another "+blockMark+" ends it")
	b.WriteString("Keys: Up and Down recall earlier lines, also of earlier chats; Ctrl-R searches them;\n" +
		"Tab completes a command; Ctrl-C stops a reply or drops the line; Ctrl-D leaves.\n")
	return b.String()
}

// completeCommand completes the names of commands and settings on Tab.
func completeCommand(line string) []string {
	if !strings.HasPrefix(line, "/") || strings.HasPrefix(line, "//") {
		return nil
	}
	var out []string
	if rest, ok := strings.CutPrefix(line, "/set "); ok {
		for _, f := range sampling.Flags() {
			if strings.HasPrefix(f, rest) {
				out = append(out, "/set "+f+" ")
			}
		}
		return out
	}
	for _, spec := range commandSpecs() {
		for _, name := range spec.names {
			if strings.HasPrefix("/"+name, line) {
				c := "/" + name
				if spec.args != "" {
					c += " "
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// do runs a command. A command that cannot do what it was asked says why
// in one line and changes nothing; only a failure of the program itself is
// returned, and errBye.
func (ch *Chat) do(in *console, cmd *command) error {
	switch cmd.name {
	case "help":
		fmt.Fprint(ch.notes, helpText())
	case "bye":
		return errBye
	case "clear":
		ch.clear(ch.c.System())
		ch.note("a new conversation")
	case "system":
		ch.clear(cmd.arg)
		ch.note("a new conversation with this system message")
	case "think":
		if err := ch.c.SetThinking(cmd.on); err != nil {
			ch.note("/think: %v", err)
			return nil
		}
		ch.note("thinking %s", onOff(cmd.on))
	case "set":
		if ch.penaltiesOff && sampling.IsPenalty(cmd.flag) {
			ch.note("/set %s: the penalties are off (%s 0); /set %s N to turn them on first", cmd.flag, sampling.RepeatLastNFlag, sampling.RepeatLastNFlag)
			return nil
		}
		req := ch.c.Settings()
		cmd.change(req.Sampling)
		if err := ch.c.SetSettings(req); err != nil {
			return err
		}
		if cmd.flag == sampling.RepeatLastNFlag {
			// Only a 0 leaves the window 0; -1 and N are kept as given.
			if ch.penaltiesOff = req.Sampling.RepeatLastN == 0; ch.penaltiesOff {
				ch.note("%s 0: the penalties are off", cmd.flag)
				return nil
			}
		}
		ch.note("%s %s", cmd.flag, req.Sampling.Flag(cmd.flag))
	case "show":
		ch.showSettings()
	case "save":
		path := expandHome(cmd.arg)
		msgs := ch.c.Messages()
		// A directory would fail only at the rename, as "file exists".
		if err := fsutil.CheckOutput(path); err != nil {
			ch.note("/save %s: %v", cmd.arg, err)
			return nil
		}
		if err := qwen.SaveMessages(path, msgs); err != nil {
			ch.note("/save %s: %v", cmd.arg, err)
			return nil
		}
		ch.note("saved %d messages to %s", len(msgs), path)
	case "load":
		return ch.load(in, cmd.arg)
	}
	return nil
}

// load is /load: a file that cannot be continued is one line, and the
// current conversation stays.
func (ch *Chat) load(in *console, arg string) error {
	path := expandHome(arg)
	msgs, err := qwen.LoadMessages(path)
	if err != nil {
		ch.note("/load %s: %v", arg, err)
		return nil
	}
	var res qwen.Result
	end := in.run(func(ctx context.Context) bool {
		res, err = ch.c.Load(ctx, msgs)
		return res.Stop == qwen.StopInterrupt
	})
	var noRoom *qwen.NoRoomError
	switch {
	case errors.As(err, &noRoom):
		ch.note("/load %s: %v (--ctx)", arg, err)
		return nil
	case err != nil:
		return err
	case end != nil:
		return end
	case res.Stop == qwen.StopInterrupt:
		ch.note("loaded %d messages from %s; Ctrl-C stopped reading them, the next message reads the rest", len(msgs), path)
	default:
		ch.note("loaded %d messages from %s (%d tokens)", len(msgs), path, ch.c.Used())
	}
	if ch.o.Verbose {
		ch.stats(res)
	}
	return nil
}

// showSettings is /show.
func (ch *Chat) showSettings() {
	row := func(name, format string, args ...any) {
		fmt.Fprintf(ch.notes, "%-10s%s\n", name, fmt.Sprintf(format, args...))
	}
	settings := ch.c.Settings()
	row("model", "%s (%s chat template)", ch.info.Name, ch.format())
	row("context", "%d of %d tokens used", ch.c.Used(), ch.info.Context)
	sampled := settings.Sampling.Describe()
	if ch.penaltiesOff {
		// Describe gives the window a Params' 0 means, 64.
		w := sampling.RepeatLastNFlag + " "
		sampled = strings.Replace(sampled, w+settings.Sampling.Flag(sampling.RepeatLastNFlag), w+"0", 1)
	}
	row("sampling", "%s", sampled)
	if _, thinks := ch.format().Thinking(); thinks {
		row("thinking", "%s", onOff(!settings.NoThinking))
	}
	switch sys, def := ch.c.System(), ch.format().DefaultSystem(); {
	case sys != "":
		row("system", "%s", sys)
	case def != "":
		row("system", "none (the template's default: %s)", def)
	default:
		row("system", "none")
	}
	row("messages", "%d", len(ch.c.Messages()))
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// expandHome reads a leading "~/" as the home directory, as a shell would
// have done had the name been typed there.
func expandHome(path string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return path
}
