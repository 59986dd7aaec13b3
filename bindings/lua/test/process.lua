local H = require('harness')
