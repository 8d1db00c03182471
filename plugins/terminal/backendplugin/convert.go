package backendplugin

import (
	"time"

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
		Input:     string(r.Input),
		RawEnd:    r.RawEnd,
	}
	if r.LimitsHit != (termapi.Limits{}) {
		out.LimitsHit = limitsToPB(r.LimitsHit)
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
		Input:     termapi.InputMode(r.GetInput()),
		RawEnd:    r.GetRawEnd(),
		LimitsHit: limitsFromPB(r.GetLimitsHit()),
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

func limitsToPB(l termapi.Limits) *backendpb.Limits {
	return &backendpb.Limits{Memory: l.Memory, Pids: int64(l.Pids), Cpu: l.CPU}
}

func limitsFromPB(l *backendpb.Limits) termapi.Limits {
	return termapi.Limits{Memory: l.GetMemory(), Pids: int(l.GetPids()), CPU: l.GetCpu()}
}

func sizeToPB(s termapi.Size) *backendpb.Size {
	return &backendpb.Size{Rows: int32(s.Rows), Cols: int32(s.Cols)}
}

func sizeFromPB(s *backendpb.Size) termapi.Size {
	return termapi.Size{Rows: int(s.GetRows()), Cols: int(s.GetCols())}
}

func policyToPB(p termapi.Policy) *backendpb.Policy {
	return &backendpb.Policy{Sandbox: string(p.Sandbox), Limits: limitsToPB(p.Limits), Size: sizeToPB(p.Size)}
}

func policyFromPB(p *backendpb.Policy) termapi.Policy {
	return termapi.Policy{Sandbox: termapi.SandboxMode(p.GetSandbox()), Limits: limitsFromPB(p.GetLimits()), Size: sizeFromPB(p.GetSize())}
}

func capsToPB(c termapi.Capabilities) *backendpb.Capabilities {
	return &backendpb.Capabilities{
		Exec:       c.Exec,
		Raw:        c.Raw,
		Resize:     c.Resize,
		Attach:     c.Attach,
		InputProof: c.InputProof,
		Sandbox:    string(c.Sandbox),
		Limits:     limitsToPB(c.Limits),
		EndCommand: c.EndCommand,
		Files:      c.Files,
		HostFiles:  c.HostFiles,
		Keep:       c.Keep,
	}
}

func capsFromPB(c *backendpb.Capabilities) termapi.Capabilities {
	return termapi.Capabilities{
		Exec:       c.GetExec(),
		Raw:        c.GetRaw(),
		Resize:     c.GetResize(),
		Attach:     c.GetAttach(),
		InputProof: c.GetInputProof(),
		Sandbox:    termapi.SandboxMode(c.GetSandbox()),
		Limits:     limitsFromPB(c.GetLimits()),
		EndCommand: c.GetEndCommand(),
		Files:      c.GetFiles(),
		HostFiles:  c.GetHostFiles(),
		Keep:       c.GetKeep(),
	}
}

func spawnResponse(s termapi.Session) *backendpb.SpawnResponse {
	return &backendpb.SpawnResponse{Motd: []byte(s.Motd()), Pid: int64(s.PID()), Capabilities: capsToPB(s.Capabilities())}
}

func keptToPB(k *termapi.Kept) *backendpb.Kept {
	if k == nil {
		return nil
	}
	out := &backendpb.Kept{Held: k.Held, Lost: k.Lost, Output: k.Output, Lines: k.Lines, Dropped: k.Dropped, ExpiredNs: int64(k.Expired)}
	if !k.Since.IsZero() {
		out.SinceUnixNs = k.Since.UnixNano()
	}
	if u := k.Unit; u != nil {
		out.Unit = &backendpb.Unit{Command: []byte(u.Command), Ended: u.Ended}
		if u.Ended {
			out.Unit.Result = resultToPB(u.Result)
		}
	}
	return out
}

func keptFromPB(k *backendpb.Kept) *termapi.Kept {
	if k == nil {
		return nil
	}
	out := &termapi.Kept{Held: k.GetHeld(), Lost: k.GetLost(), Output: k.GetOutput(), Lines: k.GetLines(), Dropped: k.GetDropped(), Expired: time.Duration(k.GetExpiredNs())}
	if ns := k.GetSinceUnixNs(); ns != 0 {
		out.Since = time.Unix(0, ns)
	}
	if u := k.GetUnit(); u != nil {
		out.Unit = &termapi.Unit{Command: string(u.GetCommand()), Ended: u.GetEnded()}
		if r := u.GetResult(); r != nil {
			out.Unit.Result = resultFromPB(r)
		}
	}
	return out
}

func infoToPB(in termapi.Info) *backendpb.SessionInfo {
	return &backendpb.SessionInfo{
		SessionId:    in.ID,
		OwnerId:      in.OwnerID,
		Name:         in.Name,
		Pid:          int64(in.PID),
		Status:       statusToPB(in.Status),
		Capabilities: capsToPB(in.Capabilities),
		Kept:         keptToPB(in.Kept),
	}
}

func infoFromPB(in *backendpb.SessionInfo) termapi.Info {
	return termapi.Info{
		ID:           in.GetSessionId(),
		OwnerID:      in.GetOwnerId(),
		Name:         in.GetName(),
		PID:          int(in.GetPid()),
		Status:       statusFromPB(in.GetStatus()),
		Capabilities: capsFromPB(in.GetCapabilities()),
		Kept:         keptFromPB(in.GetKept()),
	}
}
