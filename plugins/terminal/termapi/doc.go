// Package termapi is the terminal contract: what a backend offers
// (Backend, Session, Send) and what travels across it (spawn specs,
// requests, results, statuses, and the errors callers branch on). It
// imports nothing of dsh, so that a backend, in process or served as an
// executable of its own (package backendplugin), links neither the host
// nor its deployment loader.
//
// The owner-fenced service that hands sessions to tools is package
// terminal; the engine pieces backends share are backendkit, screen and
// inband; the conformance kit every backend must pass is terminaltest.
package termapi
