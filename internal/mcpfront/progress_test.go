package mcpfront

import (
	"encoding/json"
	"fmt"
	"testing"
)

// TestNoProgressAfterResponse: a client forgets a progress token once the
// call's response has come (Claude Code then logs "Received a progress
// notification for an unknown token"), so no progress notification for a
// call may follow its response, whichever path answers it.
func TestNoProgressAfterResponse(t *testing.T) {
	for _, sdkOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("sdkOnly=%v", sdkOnly), func(t *testing.T) {
			r := newRig(t)
			s := r.serveRaw(t, sdkOnly)
			s.send(fastCallScripts[0].opening[0])
			s.next()
			s.send(fastCallScripts[0].opening[1])
			const calls = 300
			for i := range calls {
				s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"progressToken":%d},"name":"echo","arguments":{"text":"x"}}}`, i, i))
			}
			answered := map[float64]bool{}
			for len(answered) < calls {
				line := s.next()
				var msg struct {
					ID     *float64 `json:"id"`
					Method string   `json:"method"`
					Params struct {
						ProgressToken float64 `json:"progressToken"`
					} `json:"params"`
				}
				if err := json.Unmarshal([]byte(line), &msg); err != nil {
					t.Fatal(err)
				}
				switch {
				case msg.ID != nil:
					answered[*msg.ID] = true
				case msg.Method == "notifications/progress" && answered[msg.Params.ProgressToken]:
					t.Fatalf("progress for call %v after its response: %s", msg.Params.ProgressToken, line)
				}
			}
		})
	}
}
