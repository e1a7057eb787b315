package vswitch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/go-logr/logr"
)

// maxFrame is the largest datagram read: an Ethernet frame of the NIC's
// MTU (1500) with its header fits many times over; QEMU's dgram backend
// sends one frame per datagram.
const maxFrame = 65536

// headerLen is an Ethernet header's length: destination, source, type.
const headerLen = 14

// table is the switch's forwarding state: which socket each MAC address
// was last seen on, and every socket heard from.
type table struct {
	byMAC map[[6]byte]string
	ports map[string]bool
}

func newTable() *table {
	return &table{byMAC: map[[6]byte]string{}, ports: map[string]bool{}}
}

// route learns frame's source from port and returns the sockets the frame
// goes to. A frame too short to carry an Ethernet header goes nowhere.
func (t *table) route(port string, frame []byte) []string {
	if len(frame) < headerLen || port == "" {
		return nil
	}
	var dst, src [6]byte
	copy(dst[:], frame[0:6])
	copy(src[:], frame[6:12])
	t.ports[port] = true
	if src[0]&1 == 0 {
		t.byMAC[src] = port
	}
	if dst[0]&1 == 0 {
		if to, ok := t.byMAC[dst]; ok {
			if to == port {
				return nil
			}
			return []string{to}
		}
	}
	out := make([]string, 0, len(t.ports))
	for p := range t.ports {
		if p != port {
			out = append(out, p)
		}
	}
	return out
}

// forget drops a socket that no longer takes frames (its VM is gone) and
// the addresses learnt on it.
func (t *table) forget(port string) {
	delete(t.ports, port)
	for mac, p := range t.byMAC {
		if p == port {
			delete(t.byMAC, mac)
		}
	}
}

// Serve runs the switch on the unix datagram socket path until ctx ends.
// A stale socket file at path is replaced: the caller holds the lock that
// makes it the only switch of its segment.
func Serve(ctx context.Context, path string, log logr.Logger) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("vswitch: removing the stale socket %s: %w", path, err)
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("vswitch: listening on %s: %w", path, err)
	}
	defer os.Remove(path)
	if err := os.Chmod(path, 0o600); err != nil {
		conn.Close()
		return err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	log.Info("Switch listening", "socket", path)
	t := newTable()
	buf := make([]byte, maxFrame)
	for {
		n, from, err := conn.ReadFromUnix(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return fmt.Errorf("vswitch: reading from %s: %w", path, err)
		}
		if from == nil {
			continue // an unbound sender cannot be answered
		}
		for _, to := range t.route(from.Name, buf[:n]) {
			if _, err := conn.WriteToUnix(buf[:n], &net.UnixAddr{Name: to, Net: "unixgram"}); err != nil {
				if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
					log.Info("Port gone", "socket", to)
					t.forget(to)
					continue
				}
				// A full receive queue drops the frame, as a busy
				// link would; the guests' protocols retransmit.
				log.V(1).Info("Frame dropped", "socket", to, "err", err.Error())
			}
		}
	}
}
