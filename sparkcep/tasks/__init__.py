"""The task-based CEP engine without a splitter (Lu 2016) and its Extended SNOOP queries:
partial matches kept by one coordinator, ⟨transition, partial match, event⟩ tasks evaluated
by identical workers, a merger that fires final matches in their sequential order."""
