"""Test data several test files share: the small buggy buffers every front door is tried on."""

ADD = "def add(a, b):\n    return a - b\n"
ADD_DOCUMENTED = 'def add(a, b):\n    """Return the sum of a and b."""\n    return a - b\n'
ADD_AND_SUB = ADD_DOCUMENTED + "\n\ndef sub(a, b):\n    return a - b\n"
