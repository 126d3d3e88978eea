package relay_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// dnsConn is an in-memory DNS "server" for net.Resolver's Go implementation: it answers every A
// query with the addresses answer returns (comma-separated) and every other query with no records.
func dnsConn(answer func() string) net.Conn {
	return &fakeDNS{answer: answer}
}

type fakeDNS struct {
	answer func() string
	mu     sync.Mutex
	out    bytes.Buffer
}

func (c *fakeDNS) Write(b []byte) (int, error) {
	// Over "udp" the resolver writes one message per Write; over "tcp" each is length-prefixed.
	msg := b
	tcp := false
	if len(b) > 2 && int(binary.BigEndian.Uint16(b)) == len(b)-2 {
		msg, tcp = b[2:], true
	}
	resp := c.reply(msg)
	c.mu.Lock()
	defer c.mu.Unlock()
	if tcp {
		_ = binary.Write(&c.out, binary.BigEndian, uint16(len(resp)))
	}
	c.out.Write(resp)
	return len(b), nil
}

func (c *fakeDNS) reply(q []byte) []byte {
	if len(q) < 12 {
		return nil
	}
	// Question: name labels, then type and class.
	i := 12
	for i < len(q) && q[i] != 0 {
		i += int(q[i]) + 1
	}
	if i+5 > len(q) {
		return nil
	}
	question := q[12 : i+5]
	qtype := binary.BigEndian.Uint16(q[i+1:])
	var resp []byte
	resp = append(resp, q[0], q[1], 0x81, 0x80, 0, 1) // id, flags (response, recursion), 1 question
	var addrs [][4]byte
	for _, s := range strings.Split(c.answer(), ",") {
		if addr, err := netip.ParseAddr(s); err == nil && qtype == 1 && addr.Is4() {
			addrs = append(addrs, addr.As4())
		}
	}
	resp = append(resp, 0, byte(len(addrs)), 0, 0, 0, 0)
	resp = append(resp, question...)
	for _, a := range addrs {
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		resp = append(resp, a[:]...)
	}
	return resp
}

func (c *fakeDNS) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Read(b)
}

func (c *fakeDNS) Close() error                     { return nil }
func (c *fakeDNS) LocalAddr() net.Addr              { return &net.UDPAddr{} }
func (c *fakeDNS) RemoteAddr() net.Addr             { return &net.UDPAddr{} }
func (c *fakeDNS) SetDeadline(time.Time) error      { return nil }
func (c *fakeDNS) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeDNS) SetWriteDeadline(time.Time) error { return nil }
