package screen

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

func TestScrollbackCheckHolds(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	s := NewScrollback(50, 4096)
	for i := range 5000 {
		n := r.Intn(300)
		s.Append([]byte(strings.Repeat("x", n) + fmt.Sprint(i) + "\n"))
		if i%7 == 0 {
			s.SetPartial(strings.Repeat("p", r.Intn(5000)))
		}
		if err := s.Check(); err != nil {
			t.Fatalf("after %d appends: %v", i, err)
		}
	}
}

func TestScrollbackCheckCatchesADrift(t *testing.T) {
	s := NewScrollback(10, 1024)
	s.Append([]byte("a\nb\n"))
	s.lines++ // a count that no longer matches the lines held
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "counts 3 lines and 4 bytes, holds 2 and 4") {
		t.Errorf("Check = %v", err)
	}
}
