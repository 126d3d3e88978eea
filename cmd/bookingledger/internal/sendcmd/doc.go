// Package sendcmd is the send command: a realistic, signed webhook delivery of any provider posted
// to serve (demo and smoke tests).
package sendcmd
