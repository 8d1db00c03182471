package backendkit

import (
	"github.com/dshdev/dsh/plugins/terminal/screen"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

// DefaultReadCount is the page size of a Read that does not ask for one.
const DefaultReadCount = 500

// ReadPage serves a termapi.ReadRequest from sb: a page counted back from
// the newest line, of at most limit bytes. The caller holds the lock that
// guards sb and has brought its partial line up to date.
func ReadPage(sb *screen.Scrollback, req termapi.ReadRequest, limit int) (termapi.ReadResult, error) {
	count := req.Count
	if count == 0 {
		count = DefaultReadCount
	}
	page, err := sb.Read(req.Offset, count, limit)
	if err != nil {
		return termapi.ReadResult{}, err
	}
	return termapi.ReadResult{
		Text:       page.Text,
		TotalLines: page.TotalLines,
		LineBegin:  page.LineBegin,
		LineEnd:    page.LineEnd,
		Truncated:  page.Truncated,
	}, nil
}
