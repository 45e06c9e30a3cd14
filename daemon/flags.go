package daemon

import (
	"flag"
	"slices"
	"time"

	"github.com/ovnedge/ovnedge/lbsvc/agent"
)

// Flag is one flag of an ovnedge command, as its reference
// (docs/flags.md, rendered by daemon/cmd/flagref) shows it.
type Flag struct {
	Name    string
	Aliases []string
	// Section and Key are its place in the --config-file, "" when it has
	// none.
	Section, Key   string
	Default, Usage string
}

// Flags returns the flags daemon, render and sync share, in the order of
// their definitions, each with its config-file key and aliases.
func Flags() []Flag {
	out := make([]Flag, 0, len(options))
	for _, o := range options {
		f := Flag{Name: o.name, Section: o.section, Key: o.key, Default: o.def, Usage: o.usage}
		for alias, canonical := range aliases {
			if canonical == o.name {
				f.Aliases = append(f.Aliases, alias)
			}
		}
		slices.Sort(f.Aliases)
		out = append(out, f)
	}
	return out
}

// CommandFlags returns the flags command ("render", "sync" or
// "lbsvc-agent") takes besides (or, for lbsvc-agent, instead of) Flags.
func CommandFlags(command string) []Flag {
	register := map[string]func(*flag.FlagSet){"render": renderFlags(new(string)), "sync": syncFlags(new(bool)),
		"uninstall": uninstallFlags(new(string), new(time.Duration)), "lbsvc-agent": new(agent.Config).RegisterFlags}[command]
	if register == nil {
		return nil
	}
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	register(fs)
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) { out = append(out, Flag{Name: f.Name, Default: f.DefValue, Usage: f.Usage}) })
	return out
}

// Summary is command's one-line description ("daemon", "render", "sync").
func Summary(command string) string { return summaries[command] }
