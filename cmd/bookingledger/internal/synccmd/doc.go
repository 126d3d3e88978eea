// Package synccmd is the providers' configuration (each provider's secrets variable and flags, their
// APIs for the sync), the provider sync as serve runs it, and the sync and providers commands.
package synccmd
