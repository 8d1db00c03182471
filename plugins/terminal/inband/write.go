package inband

import "time"

// writeJob is text queued for the terminal. Its fields are guarded by the
// session's mu.
type writeJob struct {
	sn   *send    // the send that holds the slot until the job is over; nil for none
	cmd  *command // the command whose line this is; nil for other text
	data []byte
	// abandoned: the rest is not written (an interrupt came first).
	abandoned bool
	// last: the writer is writing the job's last piece.
	last bool
	// signal: the job is a signal character (see Session.sigQueued).
	signal bool
}

// writePiece bounds one write to the channel, so that an abandoned job
// stops soon and an interrupt queued behind it goes out.
const writePiece = 16 << 10

// enqueueLocked queues a job for the writer. A send's slot stays taken
// until its jobs are over.
func (s *Session) enqueueLocked(j *writeJob) {
	if j.sn != nil {
		j.sn.writes++
	}
	if j.signal {
		s.sigQueued++
	}
	s.queue = append(s.queue, j)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// abandonWritesLocked abandons every text job not written yet, and reports
// whether that cut the current command's line short. A job whose last
// piece is being written is written.
func (s *Session) abandonWritesLocked() bool {
	cut := false
	for _, j := range s.queue {
		if j.last {
			if j.cmd != nil {
				j.cmd.written = true
			}
			continue
		}
		if !j.abandoned {
			j.abandoned = true
			cut = cut || (j.cmd != nil && j.cmd == s.cur)
		}
	}
	return cut
}

// writer writes the queued jobs in order. It is the only writer of the
// terminal. The channel takes what the server's window allows at once and
// blocks beyond it (a long command, while the shell reads it), so it writes
// without the lock.
func (s *Session) writer() {
	defer close(s.writeDone)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
			case <-s.quit:
				return
			}
			s.mu.Lock()
		}
		j := s.queue[0]
		if j.cmd != nil && !j.abandoned {
			j.cmd.sent = true
		}
		off := 0
		var err error
		for off < len(j.data) && !j.abandoned && err == nil {
			piece := j.data[off:min(off+writePiece, len(j.data))]
			j.last = off+len(piece) == len(j.data)
			s.mu.Unlock()
			_, err = s.link.Write(piece)
			s.mu.Lock()
			off += len(piece)
		}
		if err != nil && !s.closing && !s.exited {
			s.log.Debug("writing to the terminal failed", "err", err)
		}
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if j.signal {
			s.sigQueued--
			s.sigWritten, s.sigUnanswered = time.Now(), true
		}
		if j.cmd != nil && off == len(j.data) && err == nil {
			j.cmd.written = true
		}
		if sn := j.sn; sn != nil {
			sn.writes--
			s.releaseLocked(sn)
		}
		s.mu.Unlock()
	}
}

// answeredLocked: the shell answered sn's text (it is back at its prompt),
// so the text is out, even if the writer has not yet returned from writing
// its last piece. The send stops holding the slot for it. Text still queued
// or only partly written keeps the slot.
func (s *Session) answeredLocked(sn *send) {
	if len(s.queue) > 0 {
		if j := s.queue[0]; j.sn == sn && j.last {
			j.sn = nil
			sn.writes--
		}
	}
}
