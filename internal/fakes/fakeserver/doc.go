// Package fakeserver is what the HTTP fakes of the vendors' APIs share:
// fault injection, the Docker probe and cleanup of their tests, and the
// runner of the referee programs that drive them with a vendor's SDK.
package fakeserver
