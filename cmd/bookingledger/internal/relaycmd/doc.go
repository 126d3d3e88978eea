// Package relaycmd is the relay's commands (endpoints, deliveries, replay), serve's relay flags, and
// a booking's deliveries as history prints them.
package relaycmd
