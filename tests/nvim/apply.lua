-- Headless Neovim (0.7+) applies an update the way a user of the README's snippet does: open a
-- file, start the server, load the snippet (CAD_SNIPPET: the README's :CopyAsDecodeApply, as
-- tests/test_neovim.py cut it out), put the update in register CAD_REGISTER, run
-- `:CopyAsDecodeApply <register>`, wait for the edit, then write the buffer text (lines + final
-- newline when 'eol') to CAD_OUT and a JSON log to CAD_LOG. Exits with :qa! or :cquit 1.
local env = vim.env
local log = { statuses = {}, messages = {}, progress = 0 }
local timeout_ms = tonumber(env.CAD_TIMEOUT_MS or "180000")

local function write_log()
  vim.fn.writefile({ vim.fn.json_encode(log) }, env.CAD_LOG)
end

local function fail(msg)
  log.error = msg
  write_log()
  vim.cmd('cquit 1')
end

local ok, err = pcall(function()
  vim.cmd('edit ' .. vim.fn.fnameescape(env.CAD_FILE))
  local bufnr = vim.api.nvim_get_current_buf()
  local initialized = false
  local client_id = vim.lsp.start_client({
    name = 'copy-as-decode',
    cmd = vim.fn.json_decode(env.CAD_CMD),
    cmd_env = vim.fn.json_decode(env.CAD_SERVER_ENV),
    root_dir = vim.fn.fnamemodify(env.CAD_FILE, ':h'),
    on_init = function(client)
      client.notify('workspace/didChangeConfiguration', { settings = vim.fn.json_decode(env.CAD_SETTINGS) })
      initialized = true
    end,
    handlers = {
      ['copyAsDecode/status'] = function(_, result) table.insert(log.statuses, result) end,
      ['window/showMessage'] = function(_, result) table.insert(log.messages, result.message) end,
      ['$/progress'] = function(...)
        log.progress = log.progress + 1
        return vim.lsp.handlers['$/progress'](...)
      end,
    },
  })
  if not client_id then return fail('start_client failed') end
  vim.lsp.buf_attach_client(bufnr, client_id)
  if not vim.wait(30000, function() return initialized end, 50) then
    return fail('the server did not initialize within 30 s')
  end

  dofile(env.CAD_SNIPPET)
  vim.fn.setreg(env.CAD_REGISTER, env.CAD_UPDATE)  -- ends in a newline: a linewise register, as yanked lines are
  vim.cmd('CopyAsDecodeApply ' .. env.CAD_REGISTER)
  local function finished()
    local editing = false
    for _, status in ipairs(log.statuses) do
      if status.state == 'editing' then editing = true
      elseif editing and (status.state == 'ready' or status.state == 'error') then return true end
    end
    return false
  end
  if not vim.wait(timeout_ms, finished, 50) then return fail('the apply did not finish in time') end
  vim.wait(500, function() return false end, 50)  -- let the last applied edit settle

  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  local text = table.concat(lines, '\n')
  if vim.api.nvim_buf_get_option(bufnr, 'eol') then text = text .. '\n' end
  local fh = assert(io.open(env.CAD_OUT, 'wb'))
  fh:write(text)
  fh:close()
  -- CAD_OTHERS (optional): {file, out} pairs; each file's buffer (an answer naming several files
  -- loads them) is written to its out, or "<no buffer>" when the edit never loaded it.
  for _, pair in ipairs(vim.fn.json_decode(env.CAD_OTHERS or '[]')) do
    local other = vim.fn.bufnr(pair[1])
    local body = '<no buffer>'
    if other ~= -1 then
      body = table.concat(vim.api.nvim_buf_get_lines(other, 0, -1, true), '\n')
      if vim.api.nvim_buf_get_option(other, 'eol') then body = body .. '\n' end
    end
    local out = assert(io.open(pair[2], 'wb'))
    out:write(body)
    out:close()
  end
  write_log()
  vim.lsp.stop_client(client_id)
  vim.wait(2000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 50)
end)
if not ok then fail(tostring(err)) end
vim.cmd('qa!')
