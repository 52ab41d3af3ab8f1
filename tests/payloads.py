"""A file from elsewhere is data, never code: the payload that the tests save to check that no loader runs it."""


class RunsCode:
    """A pickled object that, unpickled by anything that runs code from a file, creates the file `path`."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")
