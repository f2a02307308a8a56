-- Headless Neovim (0.7+) drives the copy-as-decode server like a user would: open a buggy file,
-- put a diagnostic on the bug, run the "AI fix" code action, wait for the edit, then write the
-- buffer text (as the server sees it: lines + final newline when 'eol') and a JSON log.
-- Inputs come from the environment (see tests/test_neovim.py); exits with :qa! or :cquit 1.
-- With CAD_APPLY_PENDING=1 the edit is expected to wait for review (applyMode preview, or a
-- destructive edit): the script records the buffer, then runs copyAsDecode.server.applyPending.
-- With CAD_NEAR_FILE set, the same session then pushes the settings CAD_NEAR_SETTINGS (as a
-- user's changed config reaches the server), opens that file too, puts the cursor on line
-- CAD_NEAR_LINE (1-based; no diagnostic), runs "AI fix" again and writes that buffer to CAD_NEAR_OUT.
local env = vim.env
local file, out, log_path = env.CAD_FILE, env.CAD_OUT, env.CAD_LOG
local cmd = vim.fn.json_decode(env.CAD_CMD)
local settings = vim.fn.json_decode(env.CAD_SETTINGS)
local timeout_ms = tonumber(env.CAD_TIMEOUT_MS or "180000")
local log = { statuses = {}, messages = {}, progress = 0 }

local function write_log()
  vim.fn.writefile({ vim.fn.json_encode(log) }, log_path)
end

local function fail(msg)
  log.error = msg
  write_log()
  vim.cmd('cquit 1')
end

local ok, err = pcall(function()
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local initialized = false
  local client_id = vim.lsp.start_client({
    name = 'copy-as-decode',
    cmd = cmd,
    cmd_env = vim.fn.json_decode(env.CAD_SERVER_ENV),
    root_dir = vim.fn.fnamemodify(file, ':h'),
    on_init = function(client)
      -- Neovim 0.7 does not answer workspace/configuration: push the settings.
      client.notify('workspace/didChangeConfiguration', { settings = settings })
      initialized = true
    end,
    handlers = {
      ['copyAsDecode/status'] = function(_, result)
        table.insert(log.statuses, result)
      end,
      ['window/showMessage'] = function(_, result)
        table.insert(log.messages, result.message)
      end,
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

  -- A diagnostic on the buggy line, as a linter would publish it.
  local ns = vim.api.nvim_create_namespace('cad-test')
  local bug_line = tonumber(env.CAD_BUG_LINE)
  vim.diagnostic.set(ns, bufnr, { {
    lnum = bug_line, col = 0, end_lnum = bug_line, end_col = 1,
    severity = vim.diagnostic.severity.ERROR, message = env.CAD_BUG_MESSAGE, source = 'test',
  } })
  vim.api.nvim_win_set_cursor(0, { bug_line + 1, 4 })

  -- Run the "AI fix" code action at the cursor of the current window (as a user picks it from
  -- vim.lsp.buf.code_action's menu) and wait for the edit: true, the picked action's command
  -- argument; or false, why not.
  local function ai_fix()
    local picked = nil
    local titles = {}
    vim.ui.select = function(items, _, on_choice)
      for i, item in ipairs(items) do
        local action = item[2]
        table.insert(titles, action.title)
        if action.title == 'AI fix' then
          picked = action
          return on_choice(item, i)
        end
      end
      on_choice(nil, nil)
    end
    local seen = #log.statuses  -- statuses before this edit do not count
    vim.lsp.buf.code_action({ only = { 'quickfix' } })
    if not vim.wait(10000, function() return picked ~= nil end, 50) then
      return false, 'no "AI fix" code action was offered (offered: ' .. table.concat(titles, ', ') .. ')'
    end
    log.titles = log.titles or titles
    local function finished()
      local editing = false
      for i = seen + 1, #log.statuses do
        local state = log.statuses[i].state
        if state == 'editing' then editing = true
        elseif editing and (state == 'ready' or state == 'error') then return true end
      end
      return false
    end
    if not vim.wait(timeout_ms, finished, 50) then
      return false, 'the edit did not finish in time'
    end
    return true, picked.command.arguments[1]
  end
  local function buffer_text(buf)
    local lines = vim.api.nvim_buf_get_lines(buf or bufnr, 0, -1, true)
    local text = table.concat(lines, '\n')
    if vim.api.nvim_buf_get_option(buf or bufnr, 'eol') then text = text .. '\n' end
    return text
  end

  local fixed, argument = ai_fix()
  if not fixed then return fail(argument) end
  log.instruction = argument.instruction
  if env.CAD_APPLY_PENDING == '1' then
    log.before_apply = buffer_text()
    local answered = false
    local client = vim.lsp.get_client_by_id(client_id)
    client.request('workspace/executeCommand', {
      command = 'copyAsDecode.server.applyPending',
      arguments = { { uri = vim.uri_from_bufnr(bufnr) } },
    }, function(err, result)
      log.pending_error = err and err.message or nil
      log.pending_result = result
      answered = true
    end, bufnr)
    if not vim.wait(30000, function() return answered end, 50) then
      return fail('applyPending was not answered within 30 s')
    end
    vim.wait(1000, function() return false end, 50)  -- let the applied edit settle
  end
  local text = buffer_text()
  local fh = assert(io.open(out, 'wb'))
  fh:write(text)
  fh:close()
  if env.CAD_NEAR_FILE then
    vim.lsp.get_client_by_id(client_id).notify('workspace/didChangeConfiguration',
      { settings = vim.fn.json_decode(env.CAD_NEAR_SETTINGS) })
    vim.cmd('hide edit ' .. vim.fn.fnameescape(env.CAD_NEAR_FILE))  -- the first buffer stays unwritten
    local near_buf = vim.api.nvim_get_current_buf()
    vim.lsp.buf_attach_client(near_buf, client_id)
    vim.api.nvim_win_set_cursor(0, { tonumber(env.CAD_NEAR_LINE), 4 })
    local near_fixed, near_argument = ai_fix()
    if not near_fixed then return fail('next to the bug: ' .. near_argument) end
    log.near = { instruction = near_argument.instruction, focus = near_argument.focus }
    local near_fh = assert(io.open(env.CAD_NEAR_OUT, 'wb'))
    near_fh:write(buffer_text(near_buf))
    near_fh:close()
  end
  write_log()
  vim.lsp.stop_client(client_id)
  vim.wait(2000, function() return vim.lsp.get_client_by_id(client_id) == nil end, 50)
end)
if not ok then fail(tostring(err)) end
vim.cmd('qa!')
