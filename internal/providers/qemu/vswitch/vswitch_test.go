package vswitch

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func frame(dst, src byte, payload string) []byte {
	f := []byte{dst, 0, 0, 0, 0, dst, 0x52, 0x54, 0, 0, 0, src, 0x08, 0x00}
	return append(f, payload...)
}

func TestRoute(t *testing.T) {
	tb := newTable()
	bcast := append(bytes.Repeat([]byte{0xff}, 6), 0x52, 0x54, 0, 0, 0, 1, 0x08, 0x06)
	if got := tb.route("a", bcast); len(got) != 0 {
		t.Fatalf("first frame of the only port went to %v", got)
	}
	// b's first frame, to a MAC not learnt yet, floods to a.
	if got := tb.route("b", frame(0x02, 2, "x")); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("unknown destination from b went to %v, want [a]", got)
	}
	tb.route("c", frame(0x02, 3, "x"))
	// Frames to a learnt MAC go to its port only: rewrite a's learnt MAC
	// as the destination (0x52…01).
	toA := append([]byte{0x52, 0x54, 0, 0, 0, 1}, frame(0, 2, "y")[6:]...)
	if got := tb.route("b", toA); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("frame to a's MAC went to %v", got)
	}
	// A frame to the sender's own port goes nowhere.
	if got := tb.route("a", toA); len(got) != 0 {
		t.Fatalf("frame looping back to its port went to %v", got)
	}
	// Broadcast floods to everyone else.
	got := tb.route("a", bcast)
	slices.Sort(got)
	if !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("broadcast from a went to %v", got)
	}
	if got := tb.route("a", []byte{1, 2, 3}); got != nil {
		t.Fatalf("a runt frame went to %v", got)
	}
	tb.forget("a")
	if got := tb.route("b", toA); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after a left, its MAC's frame went to %v, want a flood to [c]", got)
	}
}

// TestServe runs the switch on a real socket with two ports and checks
// that frames cross it both ways and that a port that went away is
// dropped without stopping the switch.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	sw := filepath.Join(dir, "switch")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, sw, logr.Discard()) }()
	port := func(name string) *net.UnixConn {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, name), Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b, c := port("a"), port("b"), port("c")
	swAddr := &net.UnixAddr{Name: sw, Net: "unixgram"}
	send := func(from *net.UnixConn, f []byte) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := from.WriteToUnix(f, swAddr)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	recv := func(to *net.UnixConn) []byte {
		t.Helper()
		buf := make([]byte, 2048)
		_ = to.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := to.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	// Each port announces itself (the switch learns ports from what they
	// send), then a unicast crosses.
	for i, p := range []*net.UnixConn{a, b, c} {
		send(p, frame(0xfe, byte(i+1), "hello"))
	}
	drain := func(p *net.UnixConn) {
		buf := make([]byte, 2048)
		for {
			_ = p.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := p.Read(buf); err != nil {
				return
			}
		}
	}
	drain(a)
	drain(b)
	drain(c)
	toB := append([]byte{0x52, 0x54, 0, 0, 0, 2}, frame(0, 1, "ping")[6:]...)
	send(a, toB)
	if got := recv(b); !bytes.Equal(got, toB) {
		t.Fatalf("b got %x, want %x", got, toB)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 2048)); err == nil {
		t.Fatalf("c got a unicast for b (%d bytes)", n)
	}
	// c goes away; a broadcast still reaches b.
	c.Close()
	bcast := append(bytes.Repeat([]byte{0xff}, 6), frame(0, 1, "arp")[6:]...)
	send(a, bcast)
	if got := recv(b); !bytes.Equal(got, bcast) {
		t.Fatalf("b got %x after c left", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
