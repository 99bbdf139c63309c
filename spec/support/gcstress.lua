-- busted --helper for `make test-gcstress`: every allocation finishes a
-- whole collection cycle, finalizers included, so a finalizer can run at
-- any allocation inside any C function of the runtime.
collectgarbage("incremental", 1, 1000, 30)
collectgarbage("collect") -- the new pause applies from here
