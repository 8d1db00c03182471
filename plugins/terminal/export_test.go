package terminal

// SkipOwnerCleanup breaks the service on purpose until the returned
// function restores it: owners' cleanups leave their sessions behind.
func SkipOwnerCleanup() (restore func()) {
	testHookSkipOwnerCleanup.Store(true)
	return func() { testHookSkipOwnerCleanup.Store(false) }
}
