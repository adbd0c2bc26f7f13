package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// isTerminal reports whether w is a terminal (a character device), where
// a line can be redrawn in place (a carriage return, --watch's escape
// codes). A file or a pipe (`weir demo > log`) is not: there every redraw
// would pile up on one long line, so it gets plain lines.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine shows a line that changes as work goes on: on a terminal
// (inPlace) redrawn over itself; elsewhere written as plain lines, a new
// one when it has changed and at least every has passed since the last,
// so that a log gets a readable line a second rather than one line of
// carriage returns.
type progressLine struct {
	w       io.Writer
	inPlace bool
	every   time.Duration

	last   string    // the line last written
	lastAt time.Time // when, for plain lines
	width  int       // the longest line drawn in place, to blank it out
}

// show shows line as of now.
func (p *progressLine) show(now time.Time, line string) {
	if p.inPlace {
		p.width = max(p.width, len(line))
		fmt.Fprintf(p.w, "\r%-*s", p.width, line)
		p.last = line
		return
	}
	if line == p.last || !p.lastAt.IsZero() && now.Sub(p.lastAt) < p.every {
		return
	}
	fmt.Fprintln(p.w, strings.TrimRight(line, " "))
	p.last, p.lastAt = line, now
}

// done shows the last line and ends it.
func (p *progressLine) done(line string) {
	if p.inPlace {
		p.width = max(p.width, len(line))
		fmt.Fprintf(p.w, "\r%-*s\n", p.width, line)
		return
	}
	if line != p.last {
		fmt.Fprintln(p.w, strings.TrimRight(line, " "))
	}
}
