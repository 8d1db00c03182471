package backendkit

import (
	"github.com/dshdev/dsh/plugins/terminal"
	"github.com/dshdev/dsh/plugins/terminal/screen"
)

// DefaultReadCount is the page size of a Read that does not ask for one.
const DefaultReadCount = 500

// ReadPage serves a terminal.ReadRequest from sb: a page counted back from
// the newest line, of at most limit bytes. The caller holds the lock that
// guards sb and has brought its partial line up to date.
func ReadPage(sb *screen.Scrollback, req terminal.ReadRequest, limit int) (terminal.ReadResult, error) {
	count := req.Count
	if count == 0 {
		count = DefaultReadCount
	}
	page, err := sb.Read(req.Offset, count, limit)
	if err != nil {
		return terminal.ReadResult{}, err
	}
	return terminal.ReadResult{
		Text:       page.Text,
		TotalLines: page.TotalLines,
		LineBegin:  page.LineBegin,
		LineEnd:    page.LineEnd,
		Truncated:  page.Truncated,
	}, nil
}
