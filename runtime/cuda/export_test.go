//go:build linux && amd64

package cuda

// KernelOccupancy reports kernel name's registers a thread and the blocks
// of 256 threads the GPU holds at once.
func KernelOccupancy(name string) (regs, resident int) {
	c, err := Open()
	if err != nil {
		return 0, 0
	}
	var v int32
	err = c.do(func() error {
		fn, err := c.function(name)
		if err == nil {
			cuFuncGetAttribute(&v, funcAttrNumRegs, fn)
			resident = c.residentBlocks(name)
		}
		return err
	})
	return int(v), resident
}
