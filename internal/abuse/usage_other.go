//go:build !linux

package abuse

// rss is not measured off Linux.
func rss() uint64 { return 0 }

// maxRSS is not measured off Linux.
func maxRSS() uint64 { return 0 }
