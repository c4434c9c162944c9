//go:build !linux

package nsthread

import "errors"

// Run needs Linux's network namespaces.
func Run(int, func() error) error {
	return errors.New("nsthread: network namespaces need Linux")
}
