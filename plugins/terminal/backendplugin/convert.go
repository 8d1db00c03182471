package backendplugin

import (
	"github.com/dshdev/dsh/plugins/terminal/backendplugin/internal/backendpb"
	"github.com/dshdev/dsh/plugins/terminal/termapi"
)

func statusToPB(s termapi.Status) *backendpb.SessionStatus {
	return &backendpb.SessionStatus{Exited: s.Exited, ExitCode: int32(s.ExitCode), Signal: s.Signal}
}

func statusFromPB(s *backendpb.SessionStatus) termapi.Status {
	if s == nil {
		return termapi.Running
	}
	return termapi.Status{Exited: s.Exited, ExitCode: int(s.ExitCode), Signal: s.Signal}
}

func resultToPB(r termapi.SendResult) *backendpb.Result {
	out := &backendpb.Result{
		Reason:    string(r.Reason),
		Viewport:  []byte(r.Viewport),
		Status:    statusToPB(r.Status),
		Truncated: r.Truncated,
		Prompt:    r.Prompt,
	}
	if e := r.Exec; e != nil {
		out.Exec = &backendpb.ExecResult{
			State:               string(e.State),
			ExitCode:            int32(e.ExitCode),
			Notices:             []byte(e.Notices),
			Background:          []byte(e.Background),
			BackgroundTruncated: e.BackgroundTruncated,
			Continued:           e.Continued,
		}
	}
	return out
}

func resultFromPB(r *backendpb.Result) termapi.SendResult {
	out := termapi.SendResult{
		Reason:    termapi.WaitReason(r.GetReason()),
		Viewport:  string(r.GetViewport()),
		Status:    statusFromPB(r.GetStatus()),
		Truncated: r.GetTruncated(),
		Prompt:    r.GetPrompt(),
	}
	if e := r.GetExec(); e != nil {
		out.Exec = &termapi.ExecResult{
			State:               termapi.ExecState(e.State),
			ExitCode:            int(e.ExitCode),
			Notices:             string(e.Notices),
			Background:          string(e.Background),
			BackgroundTruncated: e.BackgroundTruncated,
			Continued:           e.Continued,
		}
	}
	return out
}
